#include "server/tls_context.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#ifdef STRATA_HAVE_OPENSSL
#include <openssl/err.h>
#include <openssl/ssl.h>
#endif

namespace strata::server {

#ifdef STRATA_HAVE_OPENSSL

namespace {

// The reason of a failure: the error code's (Asio takes OpenSSL's first queued error into it), else
// the first one left in OpenSSL's queue.
std::string ssl_reason(const boost::system::error_code& ec) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (ec) return ec.message();
  const char* r = e ? ERR_reason_error_string(e) : nullptr;
  return r ? r : "unknown OpenSSL error";
}

Status readable(const char* flag, const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return err("cannot read %s %s: %s", flag, path.c_str(), std::strerror(errno));
  return {};
}

}  // namespace

bool tls_supported() {
  return true;
}

Result<std::unique_ptr<TlsContext>> make_tls_context(const std::string& key_file,
                                                     const std::string& cert_file) {
  namespace ssl = boost::asio::ssl;
  if (key_file.empty() || cert_file.empty())
    return err("TLS needs both --ssl-key-file and --ssl-cert-file (got only %s)",
               key_file.empty() ? "--ssl-cert-file" : "--ssl-key-file");
  if (auto st = readable("--ssl-cert-file", cert_file); !st.ok()) return st;
  if (auto st = readable("--ssl-key-file", key_file); !st.ok()) return st;
  auto ctx = std::make_unique<TlsContext>(ssl::context::tls_server);
  ERR_clear_error();
  boost::system::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                   ec);
  if (ec) return err("TLS setup: %s", ssl_reason(ec).c_str());
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec)
    return err("--ssl-cert-file %s is not a PEM certificate (chain): %s", cert_file.c_str(),
               ssl_reason(ec).c_str());
  ctx->use_private_key_file(key_file, ssl::context::pem, ec);
  if (ec)
    return err("--ssl-key-file %s is not a PEM private key for --ssl-cert-file %s: %s", key_file.c_str(),
               cert_file.c_str(), ssl_reason(ec).c_str());
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    return err("--ssl-key-file %s does not match the certificate of --ssl-cert-file %s: %s", key_file.c_str(),
               cert_file.c_str(), ssl_reason({}).c_str());
  return ctx;
}

#else

bool tls_supported() {
  return false;
}

Result<std::unique_ptr<TlsContext>> make_tls_context(const std::string& key_file,
                                                     const std::string& cert_file) {
  return err(
      "TLS (--ssl-key-file %s, --ssl-cert-file %s) is not available: strata was built without OpenSSL "
      "(install libssl-dev and rebuild)",
      key_file.c_str(), cert_file.c_str());
}

#endif

}  // namespace strata::server
