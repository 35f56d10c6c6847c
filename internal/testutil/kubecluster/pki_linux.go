package kubecluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the cluster's credentials, all made fresh for each cluster and
// removed with it: a CA, the apiserver's serving certificate, one client
// certificate (CN admin, group system:masters) that every component and
// kubectl use, and the service-account signing key.
type pki struct {
	dir                      string
	caCert, caKey            string
	serverCert, serverKey    string
	clientCert, clientKey    string
	saKey                    string
	caPEM, clientPEM, keyPEM []byte
}

func newPKI(dir string) (*pki, error) {
	p := &pki{dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "airlock-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	p.caCert, p.caKey = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if p.caPEM, err = writePair(p.caCert, p.caKey, caDER, caKey); err != nil {
		return nil, err
	}
	server := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(serviceIP)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	p.serverCert, p.serverKey = filepath.Join(dir, "apiserver.crt"), filepath.Join(dir, "apiserver.key")
	if _, _, err = issue(server, ca, caKey, p.serverCert, p.serverKey); err != nil {
		return nil, err
	}
	client := &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	p.clientCert, p.clientKey = filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	if p.clientPEM, p.keyPEM, err = issue(client, ca, caKey, p.clientCert, p.clientKey); err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	p.saKey = filepath.Join(dir, "sa.key")
	der, _ := x509.MarshalECPrivateKey(saKey)
	return p, os.WriteFile(p.saKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

// issue signs tmpl with the CA and writes the certificate and its key.
func issue(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(7*24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("issue %s: %w", tmpl.Subject.CommonName, err)
	}
	certPEM, err = writePair(certPath, keyPath, der, key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = os.ReadFile(keyPath)
	return certPEM, keyPEM, err
}

func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) ([]byte, error) {
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
		return nil, err
	}
	return certPEM, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
}

// kubeconfig is the one kubeconfig of the cluster (the admin's).
func (p *pki) kubeconfig(server string) string {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: airlock-test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: airlock-test
  context: {cluster: airlock-test, user: admin}
current-context: airlock-test
`, server, b64(p.caPEM), b64(p.clientPEM), b64(p.keyPEM))
}

// tlsConfig is the admin's client TLS configuration (for polling the API).
func (p *pki) tlsConfig() (*tls.Config, error) {
	cert, err := tls.X509KeyPair(p.clientPEM, p.keyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
