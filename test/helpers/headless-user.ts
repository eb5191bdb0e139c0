/**
 * A headless user of the built-in AS: reads the first POST form of a page, approves (or denies) the
 * consent page and signs in on the dev login page. Free of vitest, so the benchmark uses it too
 * (bench/lib/user-oauth-phase.ts); test/helpers/authorization-server.ts re-exports it.
 */
import type { PageHandler } from './mcp-client.js';

/** The first POST form of a page: its action and every named input's value. */
export function parseForm(html: string): { action: string; fields: Record<string, string> } | undefined {
  const form = /<form[^>]*method="post"[^>]*action="([^"]*)"[^>]*>([\s\S]*?)<\/form>/i.exec(html);
  if (!form) return undefined;
  const fields: Record<string, string> = {};
  for (const input of (form[2] as string).matchAll(/<input\b[^>]*>/gi)) {
    const name = /\bname="([^"]*)"/.exec(input[0])?.[1];
    const value = /\bvalue="([^"]*)"/.exec(input[0])?.[1] ?? '';
    if (name) fields[decodeEntities(name)] = decodeEntities(value);
  }
  return { action: decodeEntities(form[1] as string), fields };
}

export function decodeEntities(text: string): string {
  return text.replace(/&(amp|lt|gt|quot|#39|#x27);/g, (_, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'", '#x27': "'" })[e] as string);
}

export interface HeadlessUserLog {
  consentPages: string[];
  loginPages: string[];
}

/**
 * Plays the user: approves (or denies) the consent page and signs in on the dev login page as
 * `username`. Records the pages it saw.
 */
export function headlessUser(username: string, opts: { decision?: 'approve' | 'deny'; log?: HeadlessUserLog } = {}): PageHandler {
  return async (page) => {
    if (page.status !== 200) return undefined;
    const form = parseForm(page.body);
    if (!form) return undefined;
    const body = new URLSearchParams(form.fields);
    if ('username' in form.fields) {
      opts.log?.loginPages.push(page.body);
      body.set('username', username);
    } else {
      opts.log?.consentPages.push(page.body);
      body.set('decision', opts.decision ?? 'approve');
    }
    return { url: form.action, method: 'POST', body };
  };
}
