package lockward

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeCertificates writes a certificate for 127.0.0.1 and its key into
// dir, and returns a pool that trusts it.
func writeCertificates(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "lockward test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	if err := os.WriteFile(filepath.Join(dir, "server.pem"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server.key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return pool
}

func TestADaemonOverTLSServesClientsThatTrustItAndWithItsToken(t *testing.T) {
	dir := t.TempDir()
	pool := writeCertificates(t, dir)
	const token = "a-token-for-the-tls-test"
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	address := serveForTest(t, "sqlite://"+filepath.Join(dir, "locks.db"),
		"--tls-cert", filepath.Join(dir, "server.pem"), "--tls-key", filepath.Join(dir, "server.key"),
		"--token-file", filepath.Join(dir, "token"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	secure, err := Dial(ctx, address, WithTLS(&tls.Config{RootCAs: pool}), WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	defer secure.Close()
	lease, err := secure.TryLock(ctx, "over-tls")
	if err != nil {
		t.Fatalf("a client that trusts the daemon and has its token: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Plain text to a TLS daemon gets no answer; a TLS client without
	// the token is refused.
	plain, err := Dial(ctx, address, WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.TryLock(ctx, "over-tls"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a plain-text client: %v", err)
	}
	anonymous, err := Dial(ctx, address, WithTLS(&tls.Config{RootCAs: pool}))
	if err != nil {
		t.Fatal(err)
	}
	defer anonymous.Close()
	if _, err := anonymous.TryLock(ctx, "over-tls"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a client without the token: %v", err)
	}
}
