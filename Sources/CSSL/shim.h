// OpenSSL's TLS (libssl) and what the web listener's certificate needs from libcrypto.
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/rand.h>

// Macros Swift cannot import, as functions.
static inline long inkwire_ssl_set_min_tls12(SSL_CTX *ctx) { return SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION); }
static inline long inkwire_bio_pending(BIO *bio) { return (long)BIO_ctrl_pending(bio); }
static inline long inkwire_ssl_set_mode_partial_write(SSL_CTX *ctx) {
    return SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}
