// TLS for `strata serve` (--ssl-key-file / --ssl-cert-file, as llama-server spells them): an
// OpenSSL server context made from PEM files, on Boost.Asio's SSL layer. Built when OpenSSL's
// headers are found (Debian: libssl-dev; STRATA_HAVE_OPENSSL); without them TLS is an error that
// says so, and plain HTTP works as before.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"

#ifdef STRATA_HAVE_OPENSSL
#include <boost/asio/ssl/context.hpp>
#endif

namespace strata::server {

#ifdef STRATA_HAVE_OPENSSL
using TlsContext = boost::asio::ssl::context;
#else
struct TlsContext {};
#endif

bool tls_supported();

// TLS 1.2 and later with the certificate chain of cert_file and the private key of key_file (PEM);
// an unreadable or invalid file, or a key that is not the certificate's, is an error naming it.
Result<std::unique_ptr<TlsContext>> make_tls_context(const std::string& key_file,
                                                     const std::string& cert_file);

}  // namespace strata::server
