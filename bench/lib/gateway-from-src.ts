// `bin/mcp-auth-gateway.js` for the TypeScript sources (run with tsx), used by
// `npm run bench -- --runtime src` when no build is at hand.
import { main } from '../../src/cli.js';

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(1);
  },
);
