package webhook

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Guard decides where webhooks may lead. It refuses the addresses no
// receiver lives at but that reach into the host or its cloud: link-local
// addresses (169.254.0.0/16, fe80::/10), which is where cloud metadata
// services answer, the metadata services' other addresses and names, and
// addresses that are not one host (unspecified, multicast, broadcast).
// Loopback and private ranges are allowed: self-hosted agents live there.
// An operator refuses more ranges with Deny (private networks a webhook
// should not reach) and opens ranges with Allow, which wins over every
// refusal of an address (a receiver that lives on a link-local address).
//
// A webhook's URL is checked when it is registered (CheckURL: its host's
// name, and the addresses it resolves to then) and every connection is
// checked again when it is made (DialControl), after DNS resolution, since
// a name may resolve elsewhere by then.
type Guard struct {
	// Allow lists ranges webhooks may reach even where a refusal (built in
	// or Deny) would apply.
	Allow []netip.Prefix
	// Deny lists ranges refused besides the built-in ones.
	Deny []netip.Prefix
	// Lookup resolves a host name at registration; nil uses the system's
	// resolver.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// ParsePrefixes reads a list of ranges, each a CIDR range (10.0.0.0/8,
// fd00::/8) or one address (a range of just it).
func ParsePrefixes(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if p, err := netip.ParsePrefix(v); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(v)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%q is not an address or a CIDR range (such as 10.0.0.0/8)", v)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// lookupTimeout bounds the resolution CheckURL waits for: a name that does
// not resolve in time is checked when the webhook is sent instead.
const lookupTimeout = 3 * time.Second

// metadataAddrs are the addresses of cloud metadata services: the one most
// clouds answer at (link-local, refused anyway, but named for what it is),
// AWS's IPv6 one and Alibaba Cloud's.
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true,
	netip.MustParseAddr("fd00:ec2::254"):   true,
	netip.MustParseAddr("100.100.100.200"): true,
}

// metadataNames are the host names of cloud metadata services.
var metadataNames = map[string]bool{
	"metadata.google.internal":   true,
	"metadata.goog":              true,
	"metadata":                   true,
	"instance-data":              true,
	"instance-data.ec2.internal": true,
}

// nat64 is the well-known NAT64 prefix: an address in it reaches the IPv4
// address in its last 32 bits, which is checked as that address.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

var broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// RefusedError says why a webhook may not lead somewhere.
type RefusedError struct {
	Target string // the address or host name refused
	Reason string // what it is, as a noun phrase ("a link-local address")
}

func (e *RefusedError) Error() string {
	return e.Target + " is " + e.Reason + ", which webhooks may not reach"
}

// CheckAddr refuses an address webhooks may not reach.
func (g *Guard) CheckAddr(a netip.Addr) error {
	a = a.Unmap().WithZone("")
	if contains(g.Allow, a) {
		return nil
	}
	if a.Is6() && nat64.Contains(a) {
		b := a.As16()
		if err := g.CheckAddr(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})); err != nil {
			inner := err.(*RefusedError)
			return &RefusedError{Target: a.String(), Reason: "a NAT64 address of " + inner.Target + ", " + inner.Reason}
		}
		return nil
	}
	var reason string
	switch {
	case metadataAddrs[a]:
		reason = "a cloud metadata address"
	case a.IsLinkLocalUnicast():
		reason = "a link-local address"
	case a.IsMulticast():
		reason = "a multicast address"
	case a.IsUnspecified():
		reason = "the unspecified address"
	case a == broadcast:
		reason = "the broadcast address"
	case contains(g.Deny, a):
		reason = "in a range this server denies webhooks"
	default:
		return nil
	}
	return &RefusedError{Target: a.String(), Reason: reason}
}

func contains(ranges []netip.Prefix, a netip.Addr) bool {
	for _, p := range ranges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// CheckURL refuses a webhook URL whose host is a refused address, the name
// of a metadata service, or a name that resolves to a refused address now.
// A name that does not resolve (yet) passes: it is checked again, after
// resolution, each time a connection is made.
func (g *Guard) CheckURL(ctx context.Context, u *url.URL) error {
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if metadataNames[host] {
		return &RefusedError{Target: host, Reason: "the name of a cloud metadata service"}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return g.CheckAddr(a)
	}
	lookup := g.Lookup
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := lookup(ctx, host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if err := g.CheckAddr(a); err != nil {
			r := err.(*RefusedError)
			return &RefusedError{Target: host, Reason: "a name for " + r.Target + ", " + r.Reason}
		}
	}
	return nil
}

// DialControl is a net.Dialer's Control: it refuses a connection to a
// refused address just before it is made, whatever name led there.
func (g *Guard) DialControl(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook: cannot check the address %q: %w", address, err)
	}
	return g.CheckAddr(ap.Addr())
}
