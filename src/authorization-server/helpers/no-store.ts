// RFC 6749 §5.1: an answer that carries tokens or credentials, or settles
// them, is kept by no cache, HTTP/1.1 (cache-control) or HTTP/1.0 (pragma).
export const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' } as const;
