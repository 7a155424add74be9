// Loads folio_web.wasm (a plain module: its exports are `extern "C"` functions, see
// web/src/lib.rs), then runs one simulation frame per animation frame and draws it.
//
// Query parameters: `frames` (default 600) stops the simulation after that many frames and
// writes the frame count and checksum into <output id="result"> (its data-frames and
// data-checksum attributes), which CI's headless-browser test reads; 0 runs for ever.
// `entities` and `seed` set the arena (default: the demo's 3,000 agents, seed 1).
const params = new URLSearchParams(location.search);
const frames = Number(params.get("frames") ?? 600);
const entities = Number(params.get("entities") ?? 0);
const seed = BigInt(params.get("seed") ?? 1);

const $ = (id) => document.getElementById(id);

function fail(message) {
    $("result").dataset.error = message;
    $("result").textContent = `error: ${message}`;
    throw new Error(message);
}

const { instance } = await WebAssembly.instantiateStreaming(fetch("folio_web.wasm"), {});
const demo = instance.exports;
const memory = demo.memory;
demo.demo_new(entities, seed);

const side = demo.demo_side();
const canvas = $("arena");
const context = canvas.getContext("2d");
const image = context.createImageData(side, side);
const times = [];

function message() {
    const bytes = new Uint8Array(memory.buffer, demo.demo_message_ptr(), demo.demo_message_len());
    return new TextDecoder().decode(bytes);
}

function checksum() {
    return BigInt.asUintN(64, demo.demo_checksum()).toString(16).padStart(16, "0");
}

function frame() {
    const started = performance.now();
    if (!demo.demo_step()) {
        fail(message());
    }
    const took = performance.now() - started;
    // The memory may have grown (a new ArrayBuffer): take a fresh view every frame.
    const pixels = new Uint8ClampedArray(memory.buffer, demo.demo_render(), side * side * 4);
    image.data.set(pixels);
    context.putImageData(image, 0, 0);

    times.push(took);
    if (times.length > 60) times.shift();
    const sorted = [...times].sort((a, b) => a - b);
    const n = demo.demo_frame();
    $("frame").textContent = frames > 0 ? `${n} / ${frames}` : `${n}`;
    $("population").textContent = demo.demo_population();
    $("time").textContent =
        `${took.toFixed(2)} ms (median of the last ${times.length}: ` +
        `${sorted[sorted.length >> 1].toFixed(2)} ms)`;
    $("checksum").textContent = checksum();
    if (frames > 0 && n >= frames) {
        const result = $("result");
        result.dataset.frames = n;
        result.dataset.checksum = checksum();
        result.textContent = `done: ${n} frames, checksum ${checksum()}`;
        return;
    }
    requestAnimationFrame(frame);
}

requestAnimationFrame(frame);
