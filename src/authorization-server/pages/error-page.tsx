/** @jsxRuntime automatic */
/** @jsxImportSource hono/jsx */
// An error the AS cannot send back to the client (unknown client, unregistered
// redirect_uri, a stale or forged form): shown to the user, never a redirect.
import { Layout } from './layout.js';

export function ErrorPage(props: { title: string; message: string }) {
  return (
    <Layout title={props.title}>
      <h1 class="error">{props.title}</h1>
      <p>{props.message}</p>
      <p class="note">You can close this window and start again from your application.</p>
    </Layout>
  );
}
