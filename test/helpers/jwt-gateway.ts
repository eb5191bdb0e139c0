/**
 * The usual security-test stage: an RS256 test issuer, a recording upstream, and an in-process
 * gateway whose config files are built from both.
 */
import { startTestGateway, type TestGateway } from './gateway.js';
import { startRecordingUpstream, startTestIssuer, type RecordingUpstream, type TestIssuer } from './security-fixtures.js';

export interface JwtStage {
  issuer: TestIssuer;
  up: RecordingUpstream;
  gw: TestGateway;
}

/** Starts the issuer and the upstream, then the gateway with `files(stage)`; closes what started if the gateway does not. */
export async function startJwtStage(files: (stage: Omit<JwtStage, 'gw'>) => Record<string, unknown>, env: NodeJS.ProcessEnv = {}): Promise<JwtStage> {
  const [issuer, up] = await Promise.all([startTestIssuer('RS256'), startRecordingUpstream()]);
  try {
    return { issuer, up, gw: await startTestGateway(files({ issuer, up }), env) };
  } catch (err) {
    await Promise.all([issuer.close(), up.close()]);
    throw err;
  }
}

/** Stops whatever part of a stage is running: the gateway first, then what it talks to. */
export async function stopJwtStage(stage: Partial<JwtStage>): Promise<void> {
  await stage.gw?.stop();
  await Promise.all([stage.issuer?.close(), stage.up?.close()]);
}
