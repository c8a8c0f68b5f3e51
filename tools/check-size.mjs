// @ts-check
// `pnpm lint:root` fails when a unit grows past what a reader holds in their head (CONTRIBUTING,
// "Small units"): a function (declaration, expression, arrow, method, accessor) over 120 lines,
// or a file over 450 lines whose first comment does not give the reason with "Over 450 lines:".
// It reads packages/*/src, leaving out tests (*.test.ts), test support (src/testing/) and
// generated code (src/gen/), with TypeScript's own parser, so a line count is a node's span.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const MAX_FUNCTION_LINES = 120;
const MAX_FILE_LINES = 450;
const FILE_REASON = 'Over 450 lines:';
const root = join(import.meta.dirname, '..');

/** @param {string} dir @returns {string[]} */
function sources(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return ['gen', 'testing'].includes(entry.name) ? [] : sources(path);
    return path.endsWith('.ts') && !path.endsWith('.test.ts') && !path.endsWith('.d.ts')
      ? [path]
      : [];
  });
}

/** @param {ts.Node} node */
function nameOf(node) {
  const named = /** @type {{ name?: ts.Node }} */ (node).name;
  if (named !== undefined) return named.getText();
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent))
    return parent.name.getText();
  return '(anonymous)';
}

/** @param {string} file @returns {string[]} */
function problemsOf(file) {
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const where = relative(root, file);
  const problems = [];
  const lines = source.getLineStarts().length;
  const firstComment = ts.getLeadingCommentRanges(text, 0)?.[0];
  const reason =
    firstComment !== undefined &&
    text.slice(firstComment.pos, firstComment.end).includes(FILE_REASON);
  if (lines > MAX_FILE_LINES && !reason)
    problems.push(
      `${where}: ${lines} lines, over ${MAX_FILE_LINES}, and its first comment gives no "${FILE_REASON}" reason`,
    );
  /** @param {ts.Node} node */
  const visit = (node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const start = source.getLineAndCharacterOfPosition(node.getStart()).line;
      const end = source.getLineAndCharacterOfPosition(node.end).line;
      if (end - start + 1 > MAX_FUNCTION_LINES)
        problems.push(
          `${where}:${start + 1}: ${nameOf(node)} is ${end - start + 1} lines, over ${MAX_FUNCTION_LINES}`,
        );
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return problems;
}

const packages = join(root, 'packages');
const problems = readdirSync(packages, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .flatMap((entry) => {
    const src = join(packages, entry.name, 'src');
    try {
      return sources(src);
    } catch (error) {
      // A package without TypeScript sources (cni-plugin is Go) has no src to read.
      if (/** @type {NodeJS.ErrnoException} */ (error).code === 'ENOENT') return [];
      throw error;
    }
  })
  .flatMap(problemsOf);
if (problems.length > 0) {
  console.error(`check-size: ${problems.length} unit(s) too big to hold in one's head:`);
  for (const problem of problems) console.error(`  ${problem}`);
  process.exit(1);
}
console.log('check-size: no function over 120 lines, no file over 450 without a reason');
