//! rustls for the remote connection: `require` (and `prefer`) encrypt without checking the
//! server's certificate, as libpq does without a root file; `verify-ca` checks the chain
//! against the roots; `verify-full` checks the chain and the host name. Roots come from the
//! URL's `sslrootcert` (PEM text handed in by the caller) or the system's store.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::remote::conninfo::{SslMode, Target};
use crate::remote::{RemoteError, Result};

/// Accepts any certificate (the handshake's signatures are still checked): `sslmode=require`.
#[derive(Debug)]
struct Unverified(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// Checks the chain but not the host name: `sslmode=verify-ca`.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

fn roots(target: &Target) -> Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    match &target.root_pem {
        Some(pem) => {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|error| {
                    RemoteError::Tls(format!("sslrootcert is not PEM certificates: {error}"))
                })?;
                store
                    .add(cert)
                    .map_err(|error| RemoteError::Tls(format!("sslrootcert: {error}")))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A system certificate rustls cannot use is left out, as reqwest does.
                let _ = store.add(cert);
            }
        }
    }
    if store.is_empty() {
        return Err(RemoteError::Tls(
            "no root certificates to verify the server with (set sslrootcert)".to_owned(),
        ));
    }
    Ok(store)
}

/// The TLS connector for a target's `sslmode` (`None`: plain TCP).
pub fn connector(target: &Target) -> Result<Option<MakeRustlsConnect>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| RemoteError::Tls(error.to_string()))?;
    let config = match target.url.ssl {
        SslMode::Disable => return Ok(None),
        SslMode::Prefer | SslMode::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unverified(
                provider.signature_verification_algorithms,
            )))
            .with_no_client_auth(),
        SslMode::VerifyCa | SslMode::VerifyFull => {
            let verifier = WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots(target)?),
                Arc::clone(&provider) as Arc<CryptoProvider>,
            )
            .build()
            .map_err(|error| RemoteError::Tls(error.to_string()))?;
            if target.url.ssl == SslMode::VerifyCa {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(ChainOnly(verifier)))
                    .with_no_client_auth()
            } else {
                builder.with_webpki_verifier(verifier).with_no_client_auth()
            }
        }
    };
    Ok(Some(MakeRustlsConnect::new(config)))
}
