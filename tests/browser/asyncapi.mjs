// Reads docs/asyncapi.yaml with @asyncapi/parser (the parser, not the whole CLI) and either
// prints what it declares (`node asyncapi.mjs <file>`: its messages' `type`s and its close codes,
// as JSON, after failing on any error the parser reports), or is imported by a client's tests to
// check each message they receive against the document's schemas (`messageChecker`).
import { readFile } from 'node:fs/promises';
import { Parser } from '@asyncapi/parser';

/** Parses the document; throws with the parser's errors if it is not a valid AsyncAPI 3 document. */
export async function load(path) {
  const parser = new Parser();
  const { document, diagnostics } = await parser.parse(await readFile(path, 'utf8'));
  // Severity 0 is an error; warnings and hints (1-3) are style advice.
  const errors = diagnostics.filter((d) => d.severity === 0);
  if (!document || errors.length > 0) {
    const said = errors.map((d) => `${d.path.join('.')}: ${d.message}`).join('\n');
    throw new Error(`${path} is not a valid AsyncAPI document:\n${said}`);
  }
  return document;
}

/** Every message's payload schema, by its `type` (the payload's `type` const). */
export function payloadsByType(document) {
  const byType = new Map();
  for (const message of document.allMessages().all()) {
    const payload = message.payload().json();
    byType.set(payload.properties.type.const, payload);
  }
  return byType;
}

/** The close codes the document lists. */
export function closeCodes(document) {
  const listed = document.extensions().get('x-close-codes');
  return listed ? listed.value().map((entry) => entry.code) : [];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const document = await load(process.argv[2]);
  console.log(JSON.stringify({
    version: document.version(),
    types: [...payloadsByType(document).keys()].sort(),
    close_codes: closeCodes(document),
  }));
}
