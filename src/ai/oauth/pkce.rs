//! PKCE (RFC 7636) as 1.6.0's `pkce.js`: a verifier of 32 random bytes in base64url, its
//! SHA-256 challenge in base64url (`S256`); random hex for states.

use base64::Engine as _;
use ring::rand::{SecureRandom, SystemRandom};

use crate::ai::oauth::OAuthError;

/// A verifier and its challenge.
#[derive(Clone, Debug)]
pub struct Pkce {
    /// The secret sent only with the token request.
    pub verifier: String,
    /// `base64url(sha256(verifier))`, sent with the authorization URL.
    pub challenge: String,
}

fn random_bytes(len: usize) -> Result<Vec<u8>, OAuthError> {
    let mut bytes = vec![0u8; len];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| OAuthError::Invalid("the system random source failed".to_owned()))?;
    Ok(bytes)
}

impl Pkce {
    /// Generates a fresh verifier.
    pub fn generate() -> Result<Self, OAuthError> {
        let verifier = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random_bytes(32)?);
        Ok(Self {
            challenge: challenge(&verifier),
            verifier,
        })
    }
}

/// The S256 challenge of a verifier.
pub fn challenge(verifier: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref())
}

/// `len` random bytes as lower-case hex (1.6.0's `randomBytes(16).toString("hex")`).
pub fn random_hex(len: usize) -> Result<String, OAuthError> {
    Ok(random_bytes(len)?
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_rfc_7636_s256() {
        // RFC 7636 appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let pkce = Pkce::generate().unwrap();
        assert_eq!(pkce.verifier.len(), 43);
        assert_eq!(pkce.challenge, challenge(&pkce.verifier));
        assert_eq!(random_hex(16).unwrap().len(), 32);
    }
}
