import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { readProtoDocs, renderApiDocs, undocumented } from '../scripts/api-docs.mjs';
import { PROTO_DIR, PROTO_FILES } from './index.js';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'allocnet-proto-docs-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function fixture(files: Record<string, string>): Promise<string[]> {
  for (const [name, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
    await writeFile(path.join(dir, name), text);
  }
  return Object.keys(files);
}

const PAGE = { title: 'Test API', intro: 'What this is.' };

describe('the API docs generator', () => {
  it('renders services, methods, messages, fields and enums with their comments', async () => {
    const files = await fixture({
      'test/v1/pets.proto': `// Pets and their owners.
syntax = "proto3";

package test.v1;

import "test/v1/kinds.proto";

// Feeds pets.
service PetService {
  // Feeds one pet: it eats | purrs.
  rpc Feed(FeedRequest) returns (FeedResponse);
  // Watches every meal.
  rpc Watch(FeedRequest) returns (stream FeedResponse);
}

// Which pet to feed.
message FeedRequest {
  // The pet's name (or nick | alias).
  string name = 1;
  // What it may eat,
  // by kind.
  map<string, Kind> menu = 2;
  // Grams per meal.
  repeated uint64 grams = 3;
  // What to say.
  oneof greeting {
    // Said out loud.
    string hello = 4;
    // Whistled.
    Kind whistle = 5;
  }
}

// What happened.
message FeedResponse {}
`,
      'test/v1/kinds.proto': `syntax = "proto3";

package test.v1;

// A kind of pet.
enum Kind {
  // Not said.
  KIND_UNSPECIFIED = 0;
  // Says meow.
  KIND_CAT = 1;
}
`,
    });

    const docs = readProtoDocs(dir, files);
    expect(undocumented(docs)).toEqual([]);
    expect(renderApiDocs(docs, PAGE)).toBe(`# Test API

What this is.

Services: [PetService](#petservice).

## test/v1/pets.proto

Pets and their owners.

### PetService

Service \`test.v1.PetService\`.

Feeds pets.

| Method | Request | Response | Description |
| --- | --- | --- | --- |
| [Feed](#feed) | [FeedRequest](#feedrequest) | [FeedResponse](#feedresponse) | Feeds one pet. |
| [Watch](#watch) | [FeedRequest](#feedrequest) | stream [FeedResponse](#feedresponse) | Watches every meal. |

#### Feed

\`rpc Feed(FeedRequest) returns (FeedResponse)\`

Feeds one pet: it eats | purrs.

Request: [FeedRequest](#feedrequest). Response: [FeedResponse](#feedresponse).

#### Watch

\`rpc Watch(FeedRequest) returns (stream FeedResponse)\`

Watches every meal.

Request: [FeedRequest](#feedrequest). Response: stream [FeedResponse](#feedresponse).

### FeedRequest

Message \`test.v1.FeedRequest\`.

Which pet to feed.

| Field | Number | Type | Description |
| --- | --- | --- | --- |
| \`name\` | 1 | \`string\` | The pet's name (or nick \\| alias). |
| \`menu\` | 2 | map<\`string\`, [Kind](#kind)> | What it may eat, by kind. |
| \`grams\` | 3 | repeated \`uint64\` | Grams per meal. |
| \`hello\` | 4 | \`string\` | Oneof \`greeting\`. Said out loud. |
| \`whistle\` | 5 | [Kind](#kind) | Oneof \`greeting\`. Whistled. |

Oneof \`greeting\`: What to say. At most one of \`hello\`, \`whistle\` is set.

### FeedResponse

Message \`test.v1.FeedResponse\`.

What happened.

No fields.

## test/v1/kinds.proto

### Kind

Enum \`test.v1.Kind\`.

A kind of pet.

| Value | Number | Description |
| --- | --- | --- |
| \`KIND_UNSPECIFIED\` | 0 | Not said. |
| \`KIND_CAT\` | 1 | Says meow. |
`);
  });

  it('lists every element without a comment', async () => {
    const files = await fixture({
      'bare.proto': `syntax = "proto3";
package bare;
service S { rpc M(Req) returns (Req); }
// Documented.
message Req {
  string a = 1;
  // Documented.
  string b = 2;
}
enum E { E_UNSPECIFIED = 0; }
`,
    });
    expect(undocumented(readProtoDocs(dir, files))).toEqual([
      'bare.S',
      'bare.S.M',
      'bare.Req.a',
      'bare.E',
      'bare.E.E_UNSPECIFIED',
    ]);
  });

  it('finds a comment on every element of the contract and renders it', () => {
    const docs = readProtoDocs(PROTO_DIR, PROTO_FILES);
    expect(undocumented(docs)).toEqual([]);
    expect(renderApiDocs(docs, PAGE)).toContain(
      '| `already_set_up` | 2 | `bool` | True when an identical setup already existed and no CNI ADD ran. |',
    );
  });
});
