/** A unified diff, lines coloured by kind. */
export function Diff({ text }: { text: string }) {
  if (!text) return <p className="muted">No differences.</p>;
  return (
    <div className="diff" data-testid="diff">
      {text.split('\n').map((l, i) => (
        <div key={i} className={l.startsWith('@@') ? 'hunk' : l.startsWith('+') && !l.startsWith('+++') ? 'add' : l.startsWith('-') && !l.startsWith('---') ? 'del' : ''}>
          {l || ' '}
        </div>
      ))}
    </div>
  );
}
