// golem's reporter for `node --test`: one JSON line per finished test (its name, nesting,
// file and outcome), and a last line once the stream ended normally.
export default async function* golemReporter(source) {
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const data = event.data || {};
    const error = (data.details && data.details.error) || {};
    yield JSON.stringify({pass: event.type === 'test:pass', name: String(data.name),
                          nesting: data.nesting || 0, file: data.file || '',
                          skip: data.skip !== undefined && data.skip !== false,
                          todo: data.todo !== undefined && data.todo !== false,
                          failure: error.failureType || ''}) + '\n';
  }
  yield JSON.stringify({complete: true}) + '\n';
}
