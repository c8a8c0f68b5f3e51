// @ts-check
// Reads .proto files with their comments and renders them as a markdown API reference
// (docs/api.md). Two steps: `readProtoDocs` turns protobufjs's reflection objects into a small
// plain model, `renderApiDocs` turns the model into markdown. The markdown is not yet
// prettier-formatted; scripts/generate.mjs formats it.

import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * @typedef {{ name: string, number: number, comment: string }} EnumValueDoc
 * @typedef {{ name: string, comment: string, values: EnumValueDoc[] }} EnumDoc
 * @typedef {{ name: string, anchor: string | null }} TypeRef
 *   A field's or method's type: `anchor` is set when the type is documented on the same page.
 * @typedef {{
 *   name: string,
 *   number: number,
 *   comment: string,
 *   label: 'repeated' | 'map' | '',
 *   keyType: string,
 *   type: TypeRef,
 *   oneof: string,
 * }} FieldDoc
 * @typedef {{ name: string, comment: string, fields: string[] }} OneofDoc
 * @typedef {{ name: string, comment: string, fields: FieldDoc[], oneofs: OneofDoc[] }} MessageDoc
 * @typedef {{
 *   name: string,
 *   comment: string,
 *   request: TypeRef,
 *   response: TypeRef,
 *   requestStream: boolean,
 *   responseStream: boolean,
 * }} MethodDoc
 * @typedef {{ name: string, comment: string, methods: MethodDoc[] }} ServiceDoc
 * @typedef {{
 *   file: string,
 *   comment: string,
 *   services: ServiceDoc[],
 *   messages: MessageDoc[],
 *   enums: EnumDoc[],
 * }} FileDoc
 * @typedef {{ package: string, files: FileDoc[] }} ProtoDocs
 */

/**
 * protobufjs, the parser @grpc/proto-loader itself uses, resolved through proto-loader's own
 * dependency so this package needs no second copy. Its reflection objects are read untyped and
 * turned into the typed model above at once.
 * @returns {any}
 */
function protobufjs() {
  const require = createRequire(import.meta.url);
  return createRequire(require.resolve('@grpc/proto-loader'))('protobufjs');
}

/**
 * Reads `files` (relative to `dir`, as they import one another) with their comments: the `//`
 * lines directly above an element, or a trailing `//` on its line.
 * @param {string} dir
 * @param {readonly string[]} files
 * @returns {ProtoDocs}
 */
export function readProtoDocs(dir, files) {
  const pb = protobufjs();
  const root = new pb.Root();
  root.resolvePath = (/** @type {string} */ _origin, /** @type {string} */ target) =>
    path.isAbsolute(target) ? target : path.join(dir, target);
  root.loadSync([...files], { keepCase: true, alternateCommentMode: true });
  root.resolveAll();

  // Which file defines what, and in which package.
  /** @type {Set<string>} */
  const packages = new Set();
  /** @type {Map<string, any[]>} */
  const defined = new Map(files.map((file) => [path.join(dir, file), []]));
  /** @param {any} ns */
  const visit = (ns) => {
    for (const obj of ns.nestedArray) {
      if (obj instanceof pb.Type || obj instanceof pb.Service || obj instanceof pb.Enum) {
        if (!(obj.parent instanceof pb.Type)) packages.add(obj.parent.fullName.replace(/^\./, ''));
        // undefined for a file outside `files` (an import)
        defined.get(obj.filename)?.push(obj);
        if (obj instanceof pb.Type) visit(obj); // nested messages and enums follow their parent
      } else if (obj instanceof pb.Namespace) visit(obj);
    }
  };
  visit(root);
  if (packages.size !== 1) {
    throw new Error(
      `the .proto files must declare one package, not ${JSON.stringify([...packages])}`,
    );
  }
  const [pkg = ''] = packages;
  const prefix = pkg === '' ? '.' : `.${pkg}.`;

  /** @param {any} t @returns {string} */
  function localName(t) {
    return t.fullName.startsWith(prefix) ? t.fullName.slice(prefix.length) : t.fullName.slice(1);
  }
  /** @param {any} t @returns {TypeRef} */
  function typeRef(t) {
    const local = t.fullName.startsWith(prefix);
    return { name: localName(t), anchor: local ? slug(localName(t)) : null };
  }
  /** @param {any} t @returns {MessageDoc} */
  function messageDoc(t) {
    return {
      name: localName(t),
      comment: t.comment ?? '',
      fields: t.fieldsArray.map((/** @type {any} */ f) => ({
        name: f.name,
        number: f.id,
        comment: f.comment ?? '',
        label: f.map ? 'map' : f.repeated ? 'repeated' : '',
        keyType: f.map ? f.keyType : '',
        type: f.resolvedType ? typeRef(f.resolvedType) : { name: f.type, anchor: null },
        // proto3 `optional` fields are synthetic oneofs named `_<field>`; they are not listed
        oneof: f.partOf && !f.partOf.name.startsWith('_') ? f.partOf.name : '',
      })),
      oneofs: t.oneofsArray
        .filter((/** @type {any} */ o) => !o.name.startsWith('_'))
        .map((/** @type {any} */ o) => ({
          name: o.name,
          comment: o.comment ?? '',
          fields: [...o.oneof],
        })),
    };
  }
  /** @param {any} s @returns {ServiceDoc} */
  function serviceDoc(s) {
    return {
      name: localName(s),
      comment: s.comment ?? '',
      methods: s.methodsArray.map((/** @type {any} */ m) => ({
        name: m.name,
        comment: m.comment ?? '',
        request: typeRef(m.resolvedRequestType),
        response: typeRef(m.resolvedResponseType),
        requestStream: m.requestStream === true,
        responseStream: m.responseStream === true,
      })),
    };
  }
  /** @param {any} e @returns {EnumDoc} */
  function enumDoc(e) {
    return {
      name: localName(e),
      comment: e.comment ?? '',
      values: Object.entries(e.values).map(([name, number]) => ({
        name,
        number: Number(number),
        comment: e.comments[name] ?? '',
      })),
    };
  }

  return {
    package: pkg,
    files: files.map((file) => {
      const objs = defined.get(path.join(dir, file)) ?? [];
      return {
        file,
        comment: fileComment(path.join(dir, file)),
        services: objs.filter((o) => o instanceof pb.Service).map(serviceDoc),
        messages: objs.filter((o) => o instanceof pb.Type).map(messageDoc),
        enums: objs.filter((o) => o instanceof pb.Enum).map(enumDoc),
      };
    }),
  };
}

/**
 * A file's own comment: the `//` lines at its top, before anything else.
 * @param {string} file
 */
function fileComment(file) {
  /** @type {string[]} */
  const lines = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^\s*\/\/ ?(.*)$/.exec(line);
    if (m === null) break;
    lines.push(m[1] ?? '');
  }
  return lines.join('\n').trim();
}

/**
 * Every element without a comment, by full name (`Message.field`, `Enum.VALUE`,
 * `Service.Method`), so that generation can refuse an undocumented contract.
 * @param {ProtoDocs} docs
 * @returns {string[]}
 */
export function undocumented(docs) {
  /** @type {string[]} */
  const missing = [];
  /** @param {string} name @param {string} comment */
  const need = (name, comment) => {
    if (comment.trim() === '') missing.push(`${docs.package}.${name}`);
  };
  for (const file of docs.files) {
    for (const s of file.services) {
      need(s.name, s.comment);
      for (const m of s.methods) need(`${s.name}.${m.name}`, m.comment);
    }
    for (const t of file.messages) {
      need(t.name, t.comment);
      for (const f of t.fields) need(`${t.name}.${f.name}`, f.comment);
      for (const o of t.oneofs) need(`${t.name}.${o.name}`, o.comment);
    }
    for (const e of file.enums) {
      need(e.name, e.comment);
      for (const v of e.values) need(`${e.name}.${v.name}`, v.comment);
    }
  }
  return missing;
}

/**
 * The anchor GitHub (and most markdown renderers) give a heading: lower case, punctuation other
 * than `-` and `_` dropped, spaces as `-`.
 * @param {string} heading
 */
export function slug(heading) {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

/**
 * @param {ProtoDocs} docs
 * @param {{ title: string, intro: string }} page the page's heading and the paragraphs under it
 * @returns {string} markdown, not yet prettier-formatted
 */
export function renderApiDocs(docs, page) {
  /** @type {string[]} */
  const out = [`# ${page.title}`, '', page.intro.trim(), ''];
  const services = docs.files.flatMap((f) => f.services);
  if (services.length > 0) {
    out.push(
      `Services: ${services.map((s) => link({ name: s.name, anchor: slug(s.name) })).join(', ')}.`,
      '',
    );
  }
  for (const file of docs.files) {
    out.push(`## ${file.file}`, '');
    if (file.comment !== '') out.push(file.comment, '');
    for (const s of file.services) renderService(out, docs.package, s);
    for (const t of file.messages) renderMessage(out, docs.package, t);
    for (const e of file.enums) renderEnum(out, docs.package, e);
  }
  return `${out.join('\n').trimEnd()}\n`;
}

/** @param {string[]} out @param {string} pkg @param {ServiceDoc} s */
function renderService(out, pkg, s) {
  out.push(`### ${s.name}`, '', `Service \`${qualified(pkg, s.name)}\`.`, '');
  if (s.comment !== '') out.push(s.comment, '');
  out.push('| Method | Request | Response | Description |', '| --- | --- | --- | --- |');
  for (const m of s.methods) {
    out.push(
      row([
        link({ name: m.name, anchor: slug(m.name) }),
        streamed(m.requestStream, link(m.request)),
        streamed(m.responseStream, link(m.response)),
        firstSentence(m.comment),
      ]),
    );
  }
  out.push('');
  for (const m of s.methods) {
    out.push(
      `#### ${m.name}`,
      '',
      `\`rpc ${m.name}(${m.requestStream ? 'stream ' : ''}${m.request.name}) returns (${m.responseStream ? 'stream ' : ''}${m.response.name})\``,
      '',
    );
    if (m.comment !== '') out.push(m.comment, '');
    out.push(
      `Request: ${streamed(m.requestStream, link(m.request))}. Response: ${streamed(m.responseStream, link(m.response))}.`,
      '',
    );
  }
}

/** @param {string[]} out @param {string} pkg @param {MessageDoc} t */
function renderMessage(out, pkg, t) {
  out.push(`### ${t.name}`, '', `Message \`${qualified(pkg, t.name)}\`.`, '');
  if (t.comment !== '') out.push(t.comment, '');
  if (t.fields.length === 0) {
    out.push('No fields.', '');
    return;
  }
  out.push('| Field | Number | Type | Description |', '| --- | --- | --- | --- |');
  for (const f of t.fields) {
    const type =
      f.label === 'map'
        ? `map<\`${f.keyType}\`, ${link(f.type)}>`
        : f.label === 'repeated'
          ? `repeated ${link(f.type)}`
          : link(f.type);
    const comment = f.oneof === '' ? f.comment : `Oneof \`${f.oneof}\`. ${f.comment}`;
    out.push(row([`\`${f.name}\``, String(f.number), type, comment]));
  }
  out.push('');
  for (const o of t.oneofs) {
    out.push(
      `Oneof \`${o.name}\`: ${oneLine(o.comment)} At most one of ${o.fields.map((f) => `\`${f}\``).join(', ')} is set.`,
      '',
    );
  }
}

/** @param {string[]} out @param {string} pkg @param {EnumDoc} e */
function renderEnum(out, pkg, e) {
  out.push(`### ${e.name}`, '', `Enum \`${qualified(pkg, e.name)}\`.`, '');
  if (e.comment !== '') out.push(e.comment, '');
  out.push('| Value | Number | Description |', '| --- | --- | --- |');
  for (const v of e.values) out.push(row([`\`${v.name}\``, String(v.number), v.comment]));
  out.push('');
}

/** @param {string} pkg @param {string} name */
function qualified(pkg, name) {
  return pkg === '' ? name : `${pkg}.${name}`;
}

/** @param {TypeRef} t */
function link(t) {
  return t.anchor === null ? `\`${t.name}\`` : `[${t.name}](#${t.anchor})`;
}

/** @param {boolean} stream @param {string} text */
function streamed(stream, text) {
  return stream ? `stream ${text}` : text;
}

/** @param {string} text a comment as one line */
function oneLine(text) {
  return text.replace(/\s*\n\s*/g, ' ').trim();
}

/**
 * The comment's first sentence (up to the first `.`, `:` or `;` before a space), for summary
 * tables; the full comment follows under the method's heading.
 * @param {string} text
 */
function firstSentence(text) {
  const line = oneLine(text);
  const end = line.search(/[.:;](\s|$)/);
  return end < 0 ? line : `${line.slice(0, end)}.`;
}

/** @param {string[]} cells */
function row(cells) {
  return `| ${cells.map((c) => oneLine(c).replace(/\|/g, '\\|')).join(' | ')} |`;
}
