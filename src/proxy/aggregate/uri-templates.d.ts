// The part of uri-templates (RFC 6570 expansion and de-substitution) the
// aggregated route uses; the package ships no types of its own, and
// DefinitelyTyped's leave out fromUri's options.
declare module 'uri-templates' {
  interface UriTemplate {
    readonly template: string;
    readonly varNames: string[];
    /** The variables' values that expand to `uri`, or undefined when none do. `strict`: a value must be percent-encoded as expansion would have left it. */
    fromUri(uri: string, options?: { strict?: boolean }): Record<string, unknown> | undefined;
    fill(values: Record<string, unknown>): string;
  }
  function uriTemplate(template: string): UriTemplate;
  export = uriTemplate;
}
