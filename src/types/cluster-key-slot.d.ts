// cluster-key-slot (ioredis' own dependency, which switchboard uses directly) ships no types.
declare module 'cluster-key-slot' {
  /** The Redis Cluster slot (0 to 16383) of a key: CRC16 of the key, or of its hash tag. */
  function calculateSlot(key: string | Buffer): number;
  export default calculateSlot;
}
