// The fixture's multi round-trip requests (SEP-2322, basic/patterns/mrtr):
// tools and a prompt that answer an `InputRequiredResult` until the client
// retries with `inputResponses` (and the `requestState` it was given), named
// as the conformance suite's input-required-result-* scenarios call them.
// `requestState` is HMAC-signed with a key of this server instance, so a
// tampered or foreign state is refused.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { complete, invalidParams, text, type Json } from './rpc.js';

const ELICIT_NAME = { method: 'elicitation/create', params: { message: 'What is your name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } } };
const ELICIT_COLOR = { method: 'elicitation/create', params: { message: 'Which colour?', requestedSchema: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] } } };
const SAMPLE = { method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }], maxTokens: 100 } };
const ROOTS = { method: 'roots/list', params: {} };

export const INPUT_REQUIRED_PROMPT = 'test_input_required_result_prompt';

const TOOLS = [
  'test_input_required_result_elicitation',
  'test_input_required_result_sampling',
  'test_input_required_result_list_roots',
  'test_input_required_result_request_state',
  'test_input_required_result_multiple_inputs',
  'test_input_required_result_multi_round',
  'test_input_required_result_tampered_state',
  'test_input_required_result_capabilities',
] as const;

export const INPUT_REQUIRED_TOOLS: readonly string[] = TOOLS;

interface Round {
  inputResponses: Json | undefined;
  state: Json | undefined;
  capabilities: Json;
}

export interface InputRequired {
  /** A call of one of INPUT_REQUIRED_TOOLS: the next round's answer. */
  callTool(name: string, params: Json, capabilities: Json): Json;
  /** `prompts/get` of INPUT_REQUIRED_PROMPT. */
  getPrompt(params: Json): Json;
}

export function inputRequired(): InputRequired {
  const key = randomBytes(32);
  const sign = (state: Json) => {
    const payload = Buffer.from(JSON.stringify(state)).toString('base64url');
    return `${payload}.${createHmac('sha256', key).update(payload).digest('base64url')}`;
  };
  const verify = (token: unknown): Json => {
    const [payload, mac] = typeof token === 'string' ? token.split('.') : [];
    const expected = payload === undefined ? undefined : createHmac('sha256', key).update(payload).digest();
    const given = mac === undefined ? undefined : Buffer.from(mac, 'base64url');
    if (!expected || !given || given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalidParams('requestState is not one this server issued');
    return JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8')) as Json;
  };
  const ask = (inputRequests: Json, state?: Json): Json => ({ resultType: 'input_required', inputRequests, ...(state ? { requestState: sign(state) } : {}) });

  /** A round's inputs: `inputResponses` must be an object when present; `requestState` must verify. */
  const roundOf = (params: Json, capabilities: Json): Round => {
    const { inputResponses, requestState } = params;
    if (inputResponses !== undefined && (typeof inputResponses !== 'object' || inputResponses === null || Array.isArray(inputResponses))) throw invalidParams('inputResponses must be an object');
    return { inputResponses: inputResponses as Json | undefined, state: requestState === undefined ? undefined : verify(requestState), capabilities };
  };
  /** The response under `key` when it is an accepted elicitation's content (or any object for other requests). */
  const answered = (round: Round, key: string): Json | undefined => {
    const value = round.inputResponses?.[key];
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : undefined;
  };

  const rounds: Record<(typeof TOOLS)[number], (round: Round) => Json> = {
    test_input_required_result_elicitation: (r) => {
      const reply = answered(r, 'user_name');
      return reply?.action === 'accept' ? text(`Hello, ${String((reply.content as Json | undefined)?.name)}`) : ask({ user_name: ELICIT_NAME });
    },
    test_input_required_result_sampling: (r) => (answered(r, 'capital') ? text('sampled') : ask({ capital: SAMPLE })),
    test_input_required_result_list_roots: (r) => (answered(r, 'roots') ? text('roots listed') : ask({ roots: ROOTS })),
    test_input_required_result_request_state: (r) => (r.state?.step === 'asked' && answered(r, 'confirm') ? text('state round-tripped') : ask({ confirm: ELICIT_NAME }, { step: 'asked' })),
    test_input_required_result_multiple_inputs: (r) =>
      r.state?.step === 'asked' && ['name', 'capital', 'roots'].every((k) => answered(r, k)) ? text('all three answered') : ask({ name: ELICIT_NAME, capital: SAMPLE, roots: ROOTS }, { step: 'asked' }),
    test_input_required_result_multi_round: (r) => {
      if (r.state?.round === 2 && answered(r, 'color')) return text('three rounds done');
      if (r.state?.round === 1 && answered(r, 'name')) return ask({ color: ELICIT_COLOR }, { round: 2 });
      return ask({ name: ELICIT_NAME }, { round: 1 });
    },
    test_input_required_result_tampered_state: (r) => (r.state?.step === 'asked' ? text('state intact') : ask({ confirm: ELICIT_NAME }, { step: 'asked' })),
    test_input_required_result_capabilities: (r) => {
      const requests: Json = {};
      if (r.capabilities.sampling !== undefined) requests.capital = SAMPLE;
      if (r.capabilities.elicitation !== undefined) requests.name = ELICIT_NAME;
      if (r.capabilities.roots !== undefined) requests.roots = ROOTS;
      return Object.keys(requests).length === 0 || Object.keys(requests).every((k) => answered(r, k)) ? text('asked only what the client can answer') : ask(requests);
    },
  };

  return {
    callTool: (name, params, capabilities) => rounds[name as (typeof TOOLS)[number]](roundOf(params, capabilities)),
    getPrompt(params) {
      const round = roundOf(params, {});
      const reply = answered(round, 'user_context');
      if (reply?.action !== 'accept') return ask({ user_context: ELICIT_NAME });
      return complete({ messages: [{ role: 'user', content: { type: 'text', text: `Context: ${JSON.stringify(reply.content ?? {})}` } }] });
    },
  };
}
