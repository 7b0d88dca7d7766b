// Run after `npm install` changes dependencies: `node scripts/lock-foreign-platforms.mjs`.
// This machine's registry mirror holds only linux-x64 builds of some packages with per-platform
// optional binaries (biome, workerd), so npm leaves the other platforms out of package-lock.json and
// `npm ci` then refuses the lockfile. This adds those entries, marked optional for their own os/cpu,
// exactly as a lockfile made on a machine with the full registry would have them (npm skips them here).
import { readFileSync, writeFileSync } from 'node:fs';

const lock = JSON.parse(readFileSync('package-lock.json', 'utf8'));
const platformOf = (name) => {
  const os = /darwin/.test(name)
    ? 'darwin'
    : /win32|windows/.test(name)
      ? 'win32'
      : /android/.test(name)
        ? 'android'
        : 'linux';
  const cpu = /arm64|aarch64/.test(name) ? 'arm64' : 'x64';
  const libc = /musl/.test(name) ? ['musl'] : undefined;
  return { os: [os], cpu: [cpu], ...(libc ? { libc } : {}) };
};
let added = 0;
for (const [path, entry] of Object.entries(lock.packages)) {
  for (const [dep, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const key = `node_modules/${dep}`;
    if (
      !lock.packages[key] &&
      !lock.packages[`${path}/${key}`] &&
      /(darwin|win32|windows|android|musl|linux)/.test(dep)
    ) {
      lock.packages[key] = { version, optional: true, ...platformOf(dep) };
      added++;
    }
  }
}
writeFileSync('package-lock.json', `${JSON.stringify(lock, null, 2)}\n`);
console.log(`added ${added} foreign-platform optional entries`);
