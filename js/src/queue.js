// Calls on one store run one after another, in call order: a wasm object cannot be borrowed
// by two pending calls, and transitions must not interleave.

/** Runs calls one after another, in call order. */
export class Queue {
  #tail = Promise.resolve();
  run(fn) {
    const next = this.#tail.then(fn, fn);
    this.#tail = next.catch(() => {});
    return next;
  }
}
