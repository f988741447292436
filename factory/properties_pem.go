package factory

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"os"
	"strings"
)

// keyPair names where a client certificate and its key come from: one
// file for a PEM keystore (ssl.keystore.location), two for librdkafka's
// ssl.certificate.location and ssl.key.location. The names are the
// configuration keys errors should mention.
type keyPair struct {
	certPath, keyPath string
	certKey, keyKey   string
	pass              secret // ssl.key.password; empty: the key is not encrypted
}

// load reads the certificate chain and the private key, decrypting the key
// if it is an encrypted PKCS#8 key as Kafka's PEM keystores and OpenSSL
// write them. Errors name the key and the file, never the password.
func (kp keyPair) load() (tls.Certificate, error) {
	certPEM, err := os.ReadFile(kp.certPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %v", kp.certKey, err)
	}
	keyPEM := certPEM
	if kp.keyPath != kp.certPath {
		if keyPEM, err = os.ReadFile(kp.keyPath); err != nil {
			return tls.Certificate{}, fmt.Errorf("%s: %v", kp.keyKey, err)
		}
	}
	var chain []byte
	for rest := certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			chain = append(chain, pem.EncodeToMemory(b)...)
		}
	}
	if chain == nil {
		return tls.Certificate{}, fmt.Errorf("%s: %s holds no PEM certificate", kp.certKey, kp.certPath)
	}
	key, err := kp.privateKey(keyPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	pair, err := tls.X509KeyPair(chain, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %s: %v", kp.certKey, kp.certPath, err)
	}
	return pair, nil
}

// privateKey returns the first private key block of data as unencrypted PEM.
func (kp keyPair) privateKey(data []byte) ([]byte, error) {
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return nil, fmt.Errorf("%s: %s holds no PEM private key", kp.keyKey, kp.keyPath)
		}
		switch {
		case b.Type == "ENCRYPTED PRIVATE KEY":
			if kp.pass == "" {
				return nil, fmt.Errorf("ssl.key.password: required: the private key in %s is encrypted", kp.keyPath)
			}
			der, err := decryptPKCS8(b.Bytes, string(kp.pass))
			if err != nil {
				return nil, fmt.Errorf("ssl.key.password: the private key in %s: %w", kp.keyPath, err)
			}
			return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
		case strings.HasSuffix(b.Type, "PRIVATE KEY"):
			if strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED") {
				return nil, fmt.Errorf("%s: the private key in %s uses OpenSSL's legacy encryption, which Go and Kafka's PEM keystores do not read; convert it with openssl pkcs8 -topk8 -v2 aes-256-cbc", kp.keyKey, kp.keyPath)
			}
			// A password for a key that needs none is a mistake
			// worth hearing about: the key is not protected.
			if kp.pass != "" {
				return nil, fmt.Errorf("ssl.key.password: given, but the private key in %s is not encrypted", kp.keyPath)
			}
			return pem.EncodeToMemory(b), nil
		}
	}
}

// Object identifiers of PKCS #5 v2 (RFC 8018) and the ciphers it names.
var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidDESEDE3CBC = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
)

type encryptedPrivateKeyInfo struct {
	Algo pkix.AlgorithmIdentifier
	Data []byte
}

type pbes2Params struct {
	KDF, Cipher pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	KeyLength  int                      `asn1:"optional"`
	PRF        pkix.AlgorithmIdentifier `asn1:"optional"`
}

// maxIterations bounds PBKDF2's work: OpenSSL uses 2048, Java 10000 or
// more; a corrupt file must not keep a constructor busy for minutes.
const maxIterations = 10_000_000

// errWrongPassword is what a key that does not decrypt reports: CBC
// without a MAC cannot tell a wrong password from a corrupt file.
var errWrongPassword = errors.New("does not decrypt with the password given (wrong password, or a damaged file)")

// decryptPKCS8 decrypts a PKCS #8 EncryptedPrivateKeyInfo with PBES2:
// PBKDF2 with HMAC-SHA-1 or SHA-2, and AES-CBC or 3DES-CBC, which is what
// OpenSSL 1.1 and later and Java write. It returns the PKCS #8 DER.
func decryptPKCS8(der []byte, password string) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) > 0 {
		return nil, errors.New("not a PKCS #8 encrypted key")
	}
	if !info.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encryption %v is not PBES2; convert it with openssl pkcs8 -topk8 -v2 aes-256-cbc", info.Algo.Algorithm)
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algo.Parameters.FullBytes, &params); err != nil {
		return nil, errors.New("malformed PBES2 parameters")
	}
	if !params.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("key derivation %v is not PBKDF2", params.KDF.Algorithm)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KDF.Parameters.FullBytes, &kdf); err != nil {
		return nil, errors.New("malformed PBKDF2 parameters")
	}
	if kdf.Iterations < 1 || kdf.Iterations > maxIterations {
		return nil, fmt.Errorf("PBKDF2 iteration count %d is outside 1..%d", kdf.Iterations, maxIterations)
	}
	var prf func() hash.Hash
	switch p := kdf.PRF.Algorithm; {
	case len(p) == 0, p.Equal(oidHMACSHA1):
		prf = sha1.New // the default of RFC 8018
	case p.Equal(oidHMACSHA224):
		prf = sha256.New224
	case p.Equal(oidHMACSHA256):
		prf = sha256.New
	case p.Equal(oidHMACSHA384):
		prf = sha512.New384
	case p.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("PBKDF2 pseudo-random function %v is not HMAC with SHA-1 or SHA-2", p)
	}
	var keyLen int
	var newCipher func([]byte) (cipher.Block, error)
	switch c := params.Cipher.Algorithm; {
	case c.Equal(oidAES128CBC):
		keyLen, newCipher = 16, aes.NewCipher
	case c.Equal(oidAES192CBC):
		keyLen, newCipher = 24, aes.NewCipher
	case c.Equal(oidAES256CBC):
		keyLen, newCipher = 32, aes.NewCipher
	case c.Equal(oidDESEDE3CBC):
		keyLen, newCipher = 24, des.NewTripleDESCipher
	default:
		return nil, fmt.Errorf("cipher %v is not AES-CBC or 3DES-CBC", c)
	}
	if kdf.KeyLength != 0 && kdf.KeyLength != keyLen {
		return nil, fmt.Errorf("PBKDF2 key length %d does not fit the cipher's %d", kdf.KeyLength, keyLen)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.Cipher.Parameters.FullBytes, &iv); err != nil {
		return nil, errors.New("malformed cipher parameters")
	}
	key, err := pbkdf2.Key(prf, password, kdf.Salt, kdf.Iterations, keyLen)
	if err != nil {
		return nil, fmt.Errorf("PBKDF2: %v", err)
	}
	block, err := newCipher(key)
	if err != nil {
		return nil, err
	}
	bs := block.BlockSize()
	if len(iv) != bs || len(info.Data) == 0 || len(info.Data)%bs != 0 {
		return nil, errors.New("malformed encrypted data")
	}
	plain := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, info.Data)
	// PKCS #7 padding; a wrong password shows here or in the parse below.
	n := int(plain[len(plain)-1])
	if n == 0 || n > bs {
		return nil, errWrongPassword
	}
	for _, p := range plain[len(plain)-n:] {
		if int(p) != n {
			return nil, errWrongPassword
		}
	}
	plain = plain[:len(plain)-n]
	if _, err := x509.ParsePKCS8PrivateKey(plain); err != nil {
		return nil, errWrongPassword
	}
	return plain, nil
}
