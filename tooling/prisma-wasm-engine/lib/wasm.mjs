// Load `@prisma/schema-engine-wasm` on Node 20. Its entry point imports the `.wasm` file as an ES module, which
// Node 20 only allows behind --experimental-wasm-modules, so we instantiate the module ourselves.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import * as bindings from '@prisma/schema-engine-wasm/schema_engine_bg';

/** The last panic message reported by the wasm module (its panic hook calls `set_message` before trapping). */
let lastPanicMessage = '';

/**
 * The panic hook compiled into the module expects this global object.
 * @type {{ set_message(message: string): void }}
 */
const panicRegistry = {
  set_message(message) {
    lastPanicMessage = String(message);
  },
};
Object.assign(globalThis, { PRISMA_WASM_PANIC_REGISTRY: panicRegistry });

/** @returns {string} the message of the last panic, cleared once read */
export function takePanicMessage() {
  const message = lastPanicMessage;
  lastPanicMessage = '';
  return message;
}

/** Node's WebAssembly global, which this project's TypeScript libs (ES2023, @types/node 20) do not declare. */
const webAssembly =
  /** @type {{ WebAssembly: { instantiate(bytes: Uint8Array, imports: object): Promise<{ instance: { exports: any } }> } }} */ (
    /** @type {unknown} */ (globalThis)
  ).WebAssembly;

/** @type {Promise<typeof bindings> | undefined} */
let loading;

/** @returns {Promise<typeof bindings>} the wasm bindings, instantiated once */
export function loadSchemaEngineWasm() {
  loading ??= (async () => {
    // The .wasm file is not in the package's "exports"; it sits next to the exported schema_engine_bg.js.
    const bindingsPath = fileURLToPath(import.meta.resolve('@prisma/schema-engine-wasm/schema_engine_bg'));
    const wasmPath = bindingsPath.replace(/\.js$/, '.wasm');
    const { instance } = await webAssembly.instantiate(await readFile(wasmPath), {
      './schema_engine_bg.js': /** @type {any} */ (bindings),
    });
    bindings.__wbg_set_wasm(instance.exports);
    /** @type {() => void} */ (instance.exports.__wbindgen_start)();
    return bindings;
  })();
  return loading;
}
