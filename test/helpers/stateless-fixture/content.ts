// The fixture's content tools, prompts and resources: the ones the conformance
// suite's tools-call-*, prompts-*, resources-*, completion-complete and
// json-schema-2020-12 scenarios call, each answering with the content type the
// scenario names (text, image, audio, embedded resource, a mix, a tool error,
// progress notifications on an event stream before the result).
import type { ServerResponse } from 'node:http';
import { complete, RpcError, text, type Json } from './rpc.js';

// A 1×1 PNG and a 44-byte silent WAV: the smallest real files of their kind.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = Buffer.concat([Buffer.from('RIFF'), Buffer.from([36, 0, 0, 0]), Buffer.from('WAVEfmt '), Buffer.from([16, 0, 0, 0, 1, 0, 1, 0, 0x40, 0x1f, 0, 0, 0x40, 0x1f, 0, 0, 1, 0, 8, 0]), Buffer.from('data'), Buffer.from([0, 0, 0, 0])]).toString('base64');

/** An input schema that uses the 2020-12 vocabulary (SEP-1613, SEP-2106): dialect, $defs with an $anchor, composition, conditionals. */
const SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: { address: { $anchor: 'addressDef', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
  properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' }, contactMethod: { type: 'string', enum: ['phone', 'email'] }, phone: { type: 'string' }, email: { type: 'string' } },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false,
};

const TOOLS: Record<string, { description: string; answer: (args: Json) => Json; inputSchema?: Json }> = {
  test_simple_text: { description: 'Answers with text', answer: () => text('This is a simple text response for testing.') },
  test_image_content: { description: 'Answers with an image', answer: () => complete({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }) },
  test_audio_content: { description: 'Answers with audio', answer: () => complete({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }) },
  test_embedded_resource: {
    description: 'Answers with an embedded resource',
    answer: () => complete({ content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }] }),
  },
  test_multiple_content_types: {
    description: 'Answers with text, an image and a resource',
    answer: () =>
      complete({
        content: [
          { type: 'text', text: 'Multiple content types test:' },
          { type: 'image', data: PNG, mimeType: 'image/png' },
          { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' } },
        ],
      }),
  },
  test_error_handling: { description: 'Always fails', answer: () => complete({ isError: true, content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }] }) },
  json_schema_2020_12_tool: { description: 'Takes JSON Schema 2020-12 input', answer: () => text('schema accepted'), inputSchema: SCHEMA_2020_12 },
};

export const PROGRESS_TOOL = 'test_tool_with_progress';

/** The content tools as tools/list shows them (the progress tool among them). */
export const CONTENT_TOOLS: Json[] = [
  ...Object.entries(TOOLS).map(([name, t]) => ({ name, description: t.description, inputSchema: t.inputSchema ?? { type: 'object' } })),
  { name: PROGRESS_TOOL, description: 'Reports progress before it answers', inputSchema: { type: 'object' } },
];

/** A content tool's answer, or undefined when `name` is not one. */
export const contentTool = (name: string, args: Json): Json | undefined => TOOLS[name]?.answer(args);

const sse = (message: Json) => `event: message\ndata: ${JSON.stringify(message)}\n\n`;

/** The progress tool: 0, 50 and 100 of 100 as notifications on the response stream (with a progress token), then the result. */
export function streamProgress(res: ServerResponse, id: unknown, params: Json): void {
  const token = ((params._meta ?? {}) as Json).progressToken;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const steps = [0, 50, 100];
  const next = () => {
    const progress = steps.shift();
    if (progress === undefined) return void res.end(sse({ jsonrpc: '2.0', id, result: text('progress done') }));
    if (token !== undefined) res.write(sse({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress, total: 100 } }));
    setTimeout(next, 20);
  };
  next();
}

const PROMPTS: Record<string, { description: string; arguments?: Json[]; messages: (args: Json) => Json[] }> = {
  test_simple_prompt: { description: 'A prompt without arguments', messages: () => [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }] },
  test_prompt_with_arguments: {
    description: 'A prompt with two arguments',
    arguments: [{ name: 'arg1', required: true }, { name: 'arg2', required: true }],
    messages: (a) => [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${String(a.arg1)}', arg2='${String(a.arg2)}'` } }],
  },
  test_prompt_with_embedded_resource: {
    description: 'A prompt embedding a resource',
    arguments: [{ name: 'resourceUri', required: true }],
    messages: (a) => [
      { role: 'user', content: { type: 'resource', resource: { uri: String(a.resourceUri), mimeType: 'text/plain', text: 'Embedded resource content for testing.' } } },
      { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
    ],
  },
  test_prompt_with_image: {
    description: 'A prompt with an image',
    messages: () => [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
    ],
  },
};

export const CONTENT_PROMPTS: Json[] = Object.entries(PROMPTS).map(([name, p]) => ({ name, description: p.description, ...(p.arguments ? { arguments: p.arguments } : {}) }));

/** A content prompt's messages, or undefined when `name` is not one. */
export function contentPrompt(name: string, args: Json): Json | undefined {
  const prompt = PROMPTS[name];
  return prompt && complete({ messages: prompt.messages(args) });
}

/** `completion/complete`: a few values starting with what was typed. */
export function completion(params: Json): Json {
  const typed = String(((params.argument ?? {}) as Json).value ?? '');
  if (typeof params.ref !== 'object' || params.ref === null) throw new RpcError(400, -32602, 'Invalid params: ref');
  const values = ['paris', 'park', 'party', `${typed}-one`].filter((v) => v.startsWith(typed));
  return complete({ completion: { values, total: values.length, hasMore: false } });
}

/** Binary resources and the `test://template/{id}/data` template the resources-* scenarios read. */
export const BINARY_RESOURCE = { uri: 'test://static-binary', name: 'static-binary', description: 'A PNG', mimeType: 'image/png' };
export const DATA_TEMPLATE = { uriTemplate: 'test://template/{id}/data', name: 'template-data', description: 'JSON for an id', mimeType: 'application/json' };
const DATA_URI = /^test:\/\/template\/([^/]+)\/data$/;

/** The contents of a content resource, or undefined. */
export function contentResource(uri: string): Json[] | undefined {
  if (uri === BINARY_RESOURCE.uri) return [{ uri, mimeType: 'image/png', blob: PNG }];
  const id = DATA_URI.exec(uri)?.[1];
  return id === undefined ? undefined : [{ uri, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }];
}
