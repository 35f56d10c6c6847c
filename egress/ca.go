package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/policy"
)

// authority is a per-sandbox certificate authority. Its key lives only in
// this process's memory. The CA certificate carries critical name
// constraints limiting it to the secret hosts (and no IP addresses), so a
// sandbox that trusts it trusts it for nothing else.
type authority struct {
	cert    *x509.Certificate
	certDER []byte
	key     *ecdsa.PrivateKey
	leafKey *ecdsa.PrivateKey // one key for every leaf: minting stays cheap

	mu    sync.Mutex
	cache map[string]*tls.Certificate
}

const caValidity = 90 * 24 * time.Hour

// maxLeaves bounds the leaf certificate cache.
const maxLeaves = 1024

func newAuthority(sandboxID string, hosts []policy.NetworkEntry) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate leaf key: %w", err)
	}
	var permitted []string
	var permittedIPs []*net.IPNet
	for _, h := range hosts {
		switch {
		case h.Host == "" && h.Prefix.IsValid() && h.Prefix.IsSingleIP():
			a := h.Prefix.Addr()
			permittedIPs = append(permittedIPs, &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(a.BitLen(), a.BitLen())})
		case h.Host == "":
		case h.Wildcard:
			permitted = append(permitted, "."+h.Host)
		default:
			permitted = append(permitted, h.Host)
		}
	}
	if len(permitted) == 0 {
		// No secret hosts: a CA that can name nothing.
		permitted = []string{"airlock.invalid"}
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:                randomSerial(),
		Subject:                     pkix.Name{Organization: []string{"Airlock"}, CommonName: "Airlock egress CA " + sanitizeName(sandboxID)},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(caValidity),
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         permitted,
		// No address at all, or exactly the addresses that have request
		// rules.
		ExcludedIPRanges: []*net.IPNet{
			{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
			{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)},
		},
	}
	if len(permittedIPs) > 0 {
		tmpl.ExcludedIPRanges, tmpl.PermittedIPRanges = nil, permittedIPs
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return &authority{cert: cert, certDER: der, key: key, leafKey: leafKey, cache: map[string]*tls.Certificate{}}, nil
}

// PEM returns the CA certificate in PEM form.
func (a *authority) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.certDER})
}

// leaf returns a certificate for host (a normalised name), minted once.
func (a *authority) leaf(host string) (*tls.Certificate, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.cache[host]; ok {
		return c, nil
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     a.cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = []net.IP{net.IP(ip.AsSlice())}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &a.leafKey.PublicKey, a.key)
	if err != nil {
		return nil, fmt.Errorf("mint certificate for %q: %w", host, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der, a.certDER}, PrivateKey: a.leafKey}
	if len(a.cache) >= maxLeaves {
		// Wildcard secret hosts let a sandbox name many hosts: bound memory.
		clear(a.cache)
	}
	a.cache[host] = c
	return c, nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return n
}

// sanitizeName keeps [a-z0-9_-] of s (lower-cased), for names and
// placeholders.
func sanitizeName(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteRune(c)
		}
	}
	if b.Len() == 0 {
		return "x"
	}
	return b.String()
}
