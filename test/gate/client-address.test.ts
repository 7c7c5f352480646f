// addressKey: IPv4 as is, IPv4-mapped IPv6 as its IPv4 address, IPv6 by its /64 (however it is
// written), anything else cut to a bounded length.

import t from 'tap';
import { addressKey } from '../../src/gate/client-address.js';

t.test('IPv4 addresses are their own key', async (t) => {
  for (const ip of ['127.0.0.1', '203.0.113.5', '0.0.0.0', '255.255.255.255']) t.equal(addressKey(ip), ip);
});

t.test('IPv4-mapped IPv6 addresses count as the IPv4 address', async (t) => {
  t.equal(addressKey('::ffff:203.0.113.5'), '203.0.113.5');
  t.equal(addressKey('::FFFF:cb00:7105'), '203.0.113.5');
  t.equal(addressKey('0:0:0:0:0:ffff:203.0.113.5'), '203.0.113.5');
});

t.test('IPv6 addresses count as their /64, however written', async (t) => {
  const key = '2001:db8:1:2::/64';
  for (const ip of ['2001:db8:1:2::1', '2001:0db8:0001:0002:ffff:eeee:dddd:cccc', '2001:DB8:1:2:0:0:0:9', '2001:db8:1:2:a::', '2001:db8:1:2::5%eth0']) {
    t.equal(addressKey(ip), key, ip);
  }
  t.not(addressKey('2001:db8:1:3::1'), key, 'another /64 is another key');
  t.equal(addressKey('::1'), '0:0:0:0::/64');
  t.equal(addressKey('fe80::1'), 'fe80:0:0:0::/64');
  t.equal(addressKey('64:ff9b::203.0.113.5'), '64:ff9b:0:0::/64', 'NAT64: the prefix, not the embedded IPv4');
});

t.test('anything else is kept, cut to 64 characters', async (t) => {
  t.equal(addressKey('unknown'), 'unknown');
  t.equal(addressKey('x'.repeat(1000)).length, 64);
});
