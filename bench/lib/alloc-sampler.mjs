// Preloaded into a process by bench/alloc-profile.ts (`node --import`): the
// first SIGUSR2 starts V8's sampling allocation profile, objects that
// scavenges collected included (what a request allocates, not only what
// survives); the second writes it to MAG_ALLOC_PROFILE. Plain JavaScript: it
// runs inside the built gateway, which node starts without tsx.
// MAG_ALLOC_MINOR=0 leaves out what scavenges collected: what remains is what
// survived into old space (bench/gc-retention.ts: what a request keeps too long).
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

const out = process.env.MAG_ALLOC_PROFILE;
if (!out) throw new Error('MAG_ALLOC_PROFILE (where to write the profile) is required');
const session = new Session();
session.connect();
let sampling = false;
process.on('SIGUSR2', () => {
  if (!sampling) {
    sampling = true;
    const params = { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: process.env.MAG_ALLOC_MINOR !== '0' };
    session.post('HeapProfiler.startSampling', params, (err) => err && console.error(err));
    return;
  }
  session.post('HeapProfiler.stopSampling', (err, result) => {
    if (err) return console.error(err);
    writeFileSync(out, JSON.stringify(result.profile));
  });
});
