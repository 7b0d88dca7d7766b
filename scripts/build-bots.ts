import { buildAllBots } from './bot-build';

const built = await buildAllBots();
console.log(`built ${built.length} bot bundle(s) into dist/bots`);
