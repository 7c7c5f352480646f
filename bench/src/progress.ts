// Live progress while a bench runs: one line a second on stderr, so stdout keeps only the
// final table (and can be piped).

export type ProgressSink = (line: string) => void;

export const stderrProgress: ProgressSink = (line) => {
  process.stderr.write(`${line}\n`);
};

export const noProgress: ProgressSink = () => {};
