package engine

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
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
)

// errKeyPassword is a wrong ssl.key.password, or a corrupt encrypted key:
// CBC padding cannot tell them apart.
var errKeyPassword = errors.New("cannot decrypt the private key: wrong ssl.key.password")

// pemKeyPair reads a PEM keystore (certificate chain and private key),
// as Kafka's ssl.keystore.type=PEM does: the key may be encrypted, as
// PKCS#8 (ENCRYPTED PRIVATE KEY, PBES2 with PBKDF2 and AES or 3DES, what
// openssl writes) or in OpenSSL's older Proc-Type form, with password.
func pemKeyPair(data []byte, password string) (tls.Certificate, error) {
	var certs, key []byte
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			break
		}
		switch {
		case b.Type == "CERTIFICATE":
			certs = append(certs, pem.EncodeToMemory(b)...)
		case b.Type == "ENCRYPTED PRIVATE KEY":
			if password == "" {
				return tls.Certificate{}, errors.New("the private key is encrypted: set ssl.key.password")
			}
			der, err := decryptPKCS8(b.Bytes, password)
			if err != nil {
				return tls.Certificate{}, err
			}
			key = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		case x509.IsEncryptedPEMBlock(b): //nolint:staticcheck // OpenSSL's legacy form is still written by tools operators use
			if password == "" {
				return tls.Certificate{}, errors.New("the private key is encrypted: set ssl.key.password")
			}
			der, err := x509.DecryptPEMBlock(b, []byte(password)) //nolint:staticcheck // see above
			if err != nil {
				return tls.Certificate{}, errKeyPassword
			}
			key = pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: der})
		default:
			key = pem.EncodeToMemory(b)
		}
	}
	return tls.X509KeyPair(certs, key)
}

// OIDs of PKCS#5 v2.0 (RFC 8018) and the ciphers openssl uses with it.
var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidDESEDE3CBC = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
)

type algorithm struct {
	OID    asn1.ObjectIdentifier
	Params asn1.RawValue `asn1:"optional"`
}

type encryptedPrivateKeyInfo struct {
	Algorithm algorithm
	Data      []byte
}

type pbes2Params struct {
	KDF, Cipher algorithm
}

type pbkdf2Params struct {
	Salt      []byte
	Iter      int
	KeyLength int       `asn1:"optional"`
	PRF       algorithm `asn1:"optional"`
}

// decryptPKCS8 decrypts an EncryptedPrivateKeyInfo to PKCS#8 DER.
func decryptPKCS8(der []byte, password string) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if _, err := asn1.Unmarshal(der, &info); err != nil {
		return nil, fmt.Errorf("encrypted private key: %w", err)
	}
	if !info.Algorithm.OID.Equal(oidPBES2) {
		return nil, fmt.Errorf("encrypted private key: scheme %s is not PBES2 (re-encrypt it with openssl pkcs8 -topk8 -v2 aes-256-cbc)", info.Algorithm.OID)
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algorithm.Params.FullBytes, &params); err != nil {
		return nil, fmt.Errorf("encrypted private key: PBES2 parameters: %w", err)
	}
	if !params.KDF.OID.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("encrypted private key: key derivation %s is not PBKDF2", params.KDF.OID)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KDF.Params.FullBytes, &kdf); err != nil {
		return nil, fmt.Errorf("encrypted private key: PBKDF2 parameters: %w", err)
	}
	prf := func() hash.Hash { return sha1.New() } // RFC 8018's default
	switch {
	case kdf.PRF.OID == nil, kdf.PRF.OID.Equal(oidHMACSHA1):
	case kdf.PRF.OID.Equal(oidHMACSHA256):
		prf = sha256.New
	case kdf.PRF.OID.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("encrypted private key: PBKDF2 PRF %s is not supported", kdf.PRF.OID)
	}
	var keyLen int
	var newBlock func([]byte) (cipher.Block, error)
	switch c := params.Cipher.OID; {
	case c.Equal(oidAES128CBC):
		keyLen, newBlock = 16, aes.NewCipher
	case c.Equal(oidAES192CBC):
		keyLen, newBlock = 24, aes.NewCipher
	case c.Equal(oidAES256CBC):
		keyLen, newBlock = 32, aes.NewCipher
	case c.Equal(oidDESEDE3CBC):
		keyLen, newBlock = 24, des.NewTripleDESCipher
	default:
		return nil, fmt.Errorf("encrypted private key: cipher %s is not supported (AES-CBC or DES-EDE3-CBC)", c)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.Cipher.Params.FullBytes, &iv); err != nil {
		return nil, fmt.Errorf("encrypted private key: IV: %w", err)
	}
	if kdf.Iter < 1 || kdf.Iter > 1<<24 {
		return nil, fmt.Errorf("encrypted private key: %d PBKDF2 iterations", kdf.Iter)
	}
	key, err := pbkdf2.Key(prf, password, kdf.Salt, kdf.Iter, keyLen)
	if err != nil {
		return nil, fmt.Errorf("encrypted private key: %w", err)
	}
	block, err := newBlock(key)
	if err != nil {
		return nil, err
	}
	if len(iv) != block.BlockSize() || len(info.Data) == 0 || len(info.Data)%block.BlockSize() != 0 {
		return nil, errors.New("encrypted private key: malformed ciphertext")
	}
	out := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, info.Data)
	// PKCS#7 padding; a wrong password leaves garbage here.
	n := int(out[len(out)-1])
	if n == 0 || n > block.BlockSize() {
		return nil, errKeyPassword
	}
	for _, b := range out[len(out)-n:] {
		if int(b) != n {
			return nil, errKeyPassword
		}
	}
	out = out[:len(out)-n]
	if _, err := x509.ParsePKCS8PrivateKey(out); err != nil {
		return nil, errKeyPassword
	}
	return out, nil
}
