// Preload for running the reference CLI deterministically:
//
//   node --import ./preload.mjs .../dist/bundle/cli.js ...
//
// Replaces the process's sources of time and randomness before the CLI loads:
//   Date / Date.now()       a stepping clock: starts at $PI16_CLOCK_START (ISO, default
//                           2026-11-30T10:00:00.000Z) and advances $PI16_CLOCK_STEP ms (default 1)
//                           after every reading (new Date() without arguments, Date.now())
//   performance.now()       a stepping monotonic clock: 0, then +$PI16_CLOCK_STEP per reading
//   crypto.randomUUID()     seeded v4 UUIDs (entry ids are their first 8 hex digits)
//   crypto.randomBytes(), globalThis.crypto.getRandomValues() (node:crypto's own
//                           getRandomValues cannot be replaced in Node 22),
//   crypto.randomInt(), Math.random()
//                           one seeded generator (mulberry32, seed $PI16_SEED, default 1)
// Nothing else of the CLI is changed.

import crypto from "node:crypto";
import { syncBuiltinESMExports } from "node:module";

function mulberry32(seed) {
	let a = seed >>> 0;
	return () => {
		a = (a + 0x6d2b79f5) >>> 0;
		let t = a;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	};
}

const rng = mulberry32(Number(process.env.PI16_SEED ?? 1));
const byte = () => Math.floor(rng() * 256);
const hex = (n) => {
	let s = "";
	for (let i = 0; i < n; i++) s += Math.floor(rng() * 16).toString(16);
	return s;
};
const fill = (view) => {
	const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
	for (let i = 0; i < bytes.length; i++) bytes[i] = byte();
	return view;
};

crypto.randomUUID = () => `${hex(8)}-${hex(4)}-4${hex(3)}-${"89ab"[Math.floor(rng() * 4)]}${hex(3)}-${hex(12)}`;
const realRandomBytes = crypto.randomBytes;
crypto.randomBytes = (size, callback) => {
	const buf = fill(Buffer.alloc(size));
	if (typeof callback === "function") {
		process.nextTick(() => callback(null, buf));
		return undefined;
	}
	return buf;
};
crypto.randomBytes.real = realRandomBytes;
try {
	// Node 22 defines it as a non-configurable getter; globalThis.crypto (below) is what the CLI uses.
	Object.defineProperty(crypto, "getRandomValues", { configurable: true, writable: true, value: fill });
} catch {}
crypto.randomFillSync = (buf, offset = 0, size) => {
	const view = new Uint8Array(buf.buffer ?? buf, (buf.byteOffset ?? 0) + offset, size ?? (buf.byteLength ?? buf.length) - offset);
	fill(view);
	return buf;
};
crypto.randomInt = (min, max, callback) => {
	if (max === undefined || typeof max === "function") {
		callback = max;
		max = min;
		min = 0;
	}
	const value = min + Math.floor(rng() * (max - min));
	if (typeof callback === "function") {
		process.nextTick(() => callback(null, value));
		return undefined;
	}
	return value;
};
syncBuiltinESMExports();

const webcrypto = globalThis.crypto;
Object.defineProperty(globalThis, "crypto", {
	configurable: true,
	enumerable: true,
	value: new Proxy(webcrypto, {
		get(target, prop) {
			if (prop === "getRandomValues") return fill;
			if (prop === "randomUUID") return crypto.randomUUID;
			const v = Reflect.get(target, prop, target);
			return typeof v === "function" ? v.bind(target) : v;
		},
	}),
});
Math.random = rng;

const step = Number(process.env.PI16_CLOCK_STEP ?? 1);
const RealDate = Date;
let now = RealDate.parse(process.env.PI16_CLOCK_START ?? "2026-11-30T10:00:00.000Z");
const tick = () => {
	const t = now;
	now += step;
	return t;
};
class SteppingDate extends RealDate {
	constructor(...args) {
		if (args.length === 0) super(tick());
		else super(...args);
	}
	static now() {
		return tick();
	}
}
globalThis.Date = SteppingDate;

let mono = 0;
const perf = globalThis.performance;
const steppingNow = () => {
	const t = mono;
	mono += step;
	return t;
};
try {
	Object.defineProperty(perf, "now", { configurable: true, writable: true, value: steppingNow });
} catch {
	perf.now = steppingNow;
}
