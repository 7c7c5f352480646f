// What a synchronous call throws, or undefined: for asserting on an error's code.

export function catchError(fn: () => void): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return undefined;
}
