// A TCP port nobody listens on right now (for servers that cannot take port 0).

export { freePort } from '../../testkit/services.js';
