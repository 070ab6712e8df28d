package auth

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentry/agentry/internal/db"
	"github.com/agentry/agentry/internal/db/dbsqlc"
)

// signingKeyLifetime is how long one key signs new tokens; afterwards a new key is made and the
// old one only verifies until its tokens have expired.
const signingKeyLifetime = 30 * 24 * time.Hour

// unknownKidRefresh bounds how often an unknown kid makes the key set reload from Postgres (a
// key made by another process), so forged kids cannot hammer the database.
const unknownKidRefresh = 5 * time.Second

// Keys is the set of EdDSA signing keys shared by every agentry process through Postgres. Private
// keys are stored sealed with the master key (AES-256-GCM); public keys in clear.
type Keys struct {
	db        *db.DB
	masterKey []byte
	log       *slog.Logger

	mu          sync.RWMutex
	public      map[string]ed25519.PublicKey
	signKid     string
	signKey     ed25519.PrivateKey
	signRetire  time.Time
	lastRefresh time.Time
}

// NewKeys loads the key set and makes a signing key when none usable exists.
func NewKeys(ctx context.Context, d *db.DB, masterKey []byte, log *slog.Logger) (*Keys, error) {
	if len(masterKey) != 32 {
		return nil, errors.New("signing keys: master key must be 32 bytes")
	}
	k := &Keys{db: d, masterKey: masterKey, log: log, public: map[string]ed25519.PublicKey{}}
	if err := k.refresh(ctx); err != nil {
		return nil, err
	}
	if err := k.ensureSigner(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *Keys) refresh(ctx context.Context) error {
	rows, err := k.db.Q.SigningKeyList(ctx)
	if err != nil {
		return fmt.Errorf("load signing keys: %w", err)
	}
	public := make(map[string]ed25519.PublicKey, len(rows))
	var signKid string
	var signKey ed25519.PrivateKey
	var signRetire time.Time
	for _, r := range rows {
		if len(r.PublicKey) != ed25519.PublicKeySize {
			continue
		}
		public[r.Kid] = ed25519.PublicKey(r.PublicKey)
		if signKey != nil || !time.Now().Before(r.RetireAt) {
			continue
		}
		seed, err := k.open(r.PrivateKeyEnc, []byte(r.Kid))
		if err != nil {
			// Sealed with another master key (for example an earlier development key): the key
			// still verifies, but this process cannot sign with it.
			k.log.WarnContext(ctx, "signing key cannot be unsealed with this master key", slog.String("kid", r.Kid))
			continue
		}
		signKid, signKey, signRetire = r.Kid, ed25519.NewKeyFromSeed(seed), r.RetireAt
	}
	k.mu.Lock()
	k.public = public
	if signKey != nil {
		k.signKid, k.signKey, k.signRetire = signKid, signKey, signRetire
	}
	k.lastRefresh = time.Now()
	k.mu.Unlock()
	return nil
}

func (k *Keys) ensureSigner(ctx context.Context) error {
	k.mu.RLock()
	ok := k.signKey != nil && time.Now().Add(time.Hour).Before(k.signRetire)
	k.mu.RUnlock()
	if ok {
		return nil
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	kidBytes := make([]byte, 12)
	if _, err := rand.Read(kidBytes); err != nil {
		return err
	}
	kid := base64.RawURLEncoding.EncodeToString(kidBytes)
	sealed, err := k.seal(priv.Seed(), []byte(kid))
	if err != nil {
		return err
	}
	retire := time.Now().Add(signingKeyLifetime)
	if err := k.db.Q.SigningKeyInsert(ctx, dbsqlc.SigningKeyInsertParams{Kid: kid, PublicKey: pub, PrivateKeyEnc: sealed, RetireAt: retire}); err != nil {
		return fmt.Errorf("store signing key: %w", err)
	}
	k.log.InfoContext(ctx, "created signing key", slog.String("kid", kid))
	k.mu.Lock()
	k.public[kid] = pub
	k.signKid, k.signKey, k.signRetire = kid, priv, retire
	k.mu.Unlock()
	return nil
}

// signer returns the current signing key, rotating it when it is due.
func (k *Keys) signer(ctx context.Context) (string, ed25519.PrivateKey, error) {
	if err := k.ensureSigner(ctx); err != nil {
		return "", nil, err
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.signKid, k.signKey, nil
}

// publicKey returns the verification key for kid, reloading the set (rarely) when kid is
// unknown.
func (k *Keys) publicKey(ctx context.Context, kid string) (ed25519.PublicKey, bool) {
	k.mu.RLock()
	pub, ok := k.public[kid]
	stale := time.Since(k.lastRefresh) > unknownKidRefresh
	k.mu.RUnlock()
	if ok || !stale {
		return pub, ok
	}
	if err := k.refresh(ctx); err != nil {
		k.log.WarnContext(ctx, "reload signing keys", slog.Any("error", err))
		return nil, false
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	pub, ok = k.public[kid]
	return pub, ok
}

// successor is the refresh token that rotating token yields: an HMAC of it under a key derived
// from the master key, so that only this service can tell a token's successor.
func (k *Keys) successor(token string) string {
	kdf := hmac.New(sha256.New, k.masterKey)
	kdf.Write([]byte("agentry refresh-token successor v1"))
	mac := hmac.New(sha256.New, kdf.Sum(nil))
	mac.Write([]byte(token))
	return refreshTokenPrefix + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Seal encrypts plain with the master key (AES-GCM); ad binds the result to its owner (a row's
// id): Open fails with any other ad. Stored secrets (webhook secrets) are sealed with it.
func (k *Keys) Seal(plain, ad []byte) ([]byte, error) { return k.seal(plain, ad) }

// Open decrypts what Seal sealed with the same ad.
func (k *Keys) Open(sealed, ad []byte) ([]byte, error) { return k.open(sealed, ad) }

func (k *Keys) seal(plain, ad []byte) ([]byte, error) {
	gcm, err := k.gcm()
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return gcm.Seal(nonce, nonce, plain, ad), nil
}

func (k *Keys) open(sealed, ad []byte) ([]byte, error) {
	gcm, err := k.gcm()
	if err != nil {
		return nil, err
	}
	if len(sealed) < gcm.NonceSize() {
		return nil, errors.New("sealed value too short")
	}
	return gcm.Open(nil, sealed[:gcm.NonceSize()], sealed[gcm.NonceSize():], ad)
}

func (k *Keys) gcm() (cipher.AEAD, error) {
	block, err := aes.NewCipher(k.masterKey)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
