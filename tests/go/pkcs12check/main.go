// pkcs12check opens a PKCS#12 store with go-pkcs12, the library cert-manager encodes keystores
// with, and prints what it holds. It reads PBMAC1 (RFC 9579), which OpenSSL 3.0 and Java 17
// cannot. The manager's keystore tests build it when Go is installed.
//
//	pkcs12check keystore|truststore FILE PASSWORD
package main

import (
	"crypto/x509"
	"fmt"
	"os"

	"software.sslmate.com/src/go-pkcs12"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: pkcs12check keystore|truststore FILE PASSWORD")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[2])
	if err != nil {
		fail(err)
	}
	password := os.Args[3]
	switch os.Args[1] {
	case "keystore":
		key, leaf, cas, err := pkcs12.DecodeChain(data, password)
		if err != nil {
			fail(err)
		}
		fmt.Printf("key %T\nleaf %s\n", key, leaf.Subject.CommonName)
		subjects(cas)
	case "truststore":
		cas, err := pkcs12.DecodeTrustStore(data, password)
		if err != nil {
			fail(err)
		}
		subjects(cas)
	default:
		fail(fmt.Errorf("unknown store kind %q", os.Args[1]))
	}
}

func subjects(certs []*x509.Certificate) {
	for _, cert := range certs {
		fmt.Printf("ca %s\n", cert.Subject.CommonName)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
