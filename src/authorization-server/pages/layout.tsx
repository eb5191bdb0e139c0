/** @jsxRuntime automatic */
/** @jsxImportSource hono/jsx */
// The frame of every page the built-in AS renders: no scripts, no external
// resources, inline styles only (the CSP allows nothing else).
import type { Child } from 'hono/jsx';

const STYLE = `
body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d2125}
main{max-width:34rem;margin:3rem auto;background:#fff;border-radius:8px;padding:2rem;box-shadow:0 1px 3px #0002}
h1{font-size:1.35rem;margin:0 0 1rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.4rem 1rem;margin:1rem 0}
dt{color:#5e6c84}dd{margin:0;overflow-wrap:anywhere}
.note{color:#5e6c84;font-size:.875rem}
ul.scopes{margin:.25rem 0;padding-left:1.25rem}
code{background:#f4f5f7;padding:0 .25rem;border-radius:3px}
form{display:flex;gap:.75rem;margin-top:1.5rem;flex-wrap:wrap}
input[type=text]{flex:1 1 100%;padding:.5rem;font-size:1rem;border:1px solid #c1c7d0;border-radius:4px}
button{padding:.6rem 1.2rem;font-size:1rem;border-radius:4px;border:1px solid #c1c7d0;background:#fff;cursor:pointer}
button.primary{background:#0052cc;border-color:#0052cc;color:#fff}
.error{color:#bf2600}
section.app{border-top:1px solid #dfe1e6;margin-top:1.25rem;padding-top:.25rem}
section.app h2{font-size:1.1rem;margin:.75rem 0 0}
section.app form{margin-top:.5rem}
`;

export function Layout(props: { title: string; children: Child }) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="no-referrer" />
        <title>{props.title}</title>
        <style>{STYLE}</style>
      </head>
      <body>
        <main>{props.children}</main>
      </body>
    </html>
  );
}
