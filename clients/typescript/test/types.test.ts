// The payload types are generated from docs/schema: they must be what
// the schemas generate now.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

test("src/generated/schema.ts is what docs/schema generates", async () => {
  const gen = (await import(pathToFileURL(join(root, "scripts", "gen-types.mjs")).href)) as { generate(): Promise<string>; outFile: string };
  const want = await gen.generate();
  const got = readFileSync(gen.outFile, "utf8");
  assert.ok(got === want, "src/generated/schema.ts differs from the types docs/schema/*.json generate: run npm run gen-types in clients/typescript and commit the result");
});
