#include <mosquitto.h>
/* The TLS session libmosquitto exposes (mosquitto_ssl_get), to say why a broker's certificate
   was refused (SSL_get_verify_result). */
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
