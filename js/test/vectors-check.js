// Runtime-neutral check of the shared vectors (tests/vectors/): every transcript's vector
// lines, computed by the wasm core here, must equal the natively generated ones byte for byte.
// Used by the Node test, the Deno test and the browser page.

/**
 * @param {object} mwp the imported package
 * @param {(name: string) => Promise<string>} read reads a file of tests/vectors/
 * @param {string[]} names the transcripts' base names
 * @returns {Promise<{name: string, lines: number, ok: boolean, problem?: string}[]>}
 */
export async function checkVectors(mwp, read, names) {
  const results = [];
  for (const name of names) {
    const input = await read(`${name}.jsonl`);
    const expected = (await read(`${name}.out.jsonl`)).split("\n").filter((l) => l !== "");
    const got = mwp.vectorLines(input);
    let problem;
    if (got.length !== expected.length) problem = `${got.length} lines, expected ${expected.length}`;
    for (let i = 0; !problem && i < got.length; i++) {
      if (got[i] !== expected[i]) problem = `line ${i + 1} differs:\n  got      ${got[i].slice(0, 300)}\n  expected ${expected[i].slice(0, 300)}`;
    }
    results.push({ name, lines: got.length, ok: !problem, problem });
  }
  return results;
}

/** The vector transcripts checked into tests/vectors/. */
export const VECTOR_NAMES = [
  "approvals", "effects", "expand", "idempotency", "leases_and_fencing",
  "lifecycle", "malformed", "membership", "redaction", "retries_and_budgets", "weak_keys",
];
