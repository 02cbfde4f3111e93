//! Plain ciphers: AES-CBC, AES-CTR, 3DES-CBC and NULL, in place over a validated payload.
//!
//! Key schedules are expanded once per session; a request borrows them (`cbc::Encryptor<&C>`
//! needs no copy of the schedule). Every schedule type here wipes itself on drop (the
//! RustCrypto crates' `zeroize` feature).

use aes::{Aes128, Aes192, Aes256};
use cbc::cipher::array::Array;
use cbc::cipher::{
    BlockCipherDecrypt, BlockCipherEncrypt, BlockModeDecrypt, BlockModeEncrypt, InnerIvInit, KeyInit,
    StreamCipher,
};
use des::TdesEde3;
use ocf::{CipherAlg, Error};

/// A cipher with its key schedule, chosen once per session.
pub(crate) enum Cipher {
    Aes128Cbc(Aes128),
    Aes192Cbc(Aes192),
    Aes256Cbc(Aes256),
    Aes128Ctr(Aes128),
    Aes192Ctr(Aes192),
    Aes256Ctr(Aes256),
    TdesCbc(TdesEde3),
    Null,
}

impl Cipher {
    /// `key` has a length `SessionParams::validate` accepted for `alg`.
    pub(crate) fn new(alg: CipherAlg, key: &[u8]) -> Result<Cipher, Error> {
        let bad = || Error::DriverFailure("soft: key rejected by the cipher library");
        Ok(match (alg, key.len()) {
            (CipherAlg::AesCbc, 16) => Cipher::Aes128Cbc(Aes128::new_from_slice(key).map_err(|_| bad())?),
            (CipherAlg::AesCbc, 24) => Cipher::Aes192Cbc(Aes192::new_from_slice(key).map_err(|_| bad())?),
            (CipherAlg::AesCbc, 32) => Cipher::Aes256Cbc(Aes256::new_from_slice(key).map_err(|_| bad())?),
            (CipherAlg::AesCtr, 16) => Cipher::Aes128Ctr(Aes128::new_from_slice(key).map_err(|_| bad())?),
            (CipherAlg::AesCtr, 24) => Cipher::Aes192Ctr(Aes192::new_from_slice(key).map_err(|_| bad())?),
            (CipherAlg::AesCtr, 32) => Cipher::Aes256Ctr(Aes256::new_from_slice(key).map_err(|_| bad())?),
            (CipherAlg::TdesCbc, 24) => Cipher::TdesCbc(TdesEde3::new_from_slice(key).map_err(|_| bad())?),
            (CipherAlg::Null, _) => Cipher::Null,
            _ => return Err(Error::UnsupportedCipher(alg)),
        })
    }

    /// Encrypts `data` in place. `iv` and the length of `data` were validated.
    pub(crate) fn encrypt(&self, iv: &[u8], data: &mut [u8]) {
        match self {
            Cipher::Aes128Cbc(c) => cbc_encrypt(c, iv, data),
            Cipher::Aes192Cbc(c) => cbc_encrypt(c, iv, data),
            Cipher::Aes256Cbc(c) => cbc_encrypt(c, iv, data),
            Cipher::TdesCbc(c) => cbc_encrypt(c, iv, data),
            Cipher::Aes128Ctr(c) => ctr_apply(c, iv, data),
            Cipher::Aes192Ctr(c) => ctr_apply(c, iv, data),
            Cipher::Aes256Ctr(c) => ctr_apply(c, iv, data),
            Cipher::Null => {}
        }
    }

    /// Decrypts `data` in place.
    pub(crate) fn decrypt(&self, iv: &[u8], data: &mut [u8]) {
        match self {
            Cipher::Aes128Cbc(c) => cbc_decrypt(c, iv, data),
            Cipher::Aes192Cbc(c) => cbc_decrypt(c, iv, data),
            Cipher::Aes256Cbc(c) => cbc_decrypt(c, iv, data),
            Cipher::TdesCbc(c) => cbc_decrypt(c, iv, data),
            Cipher::Aes128Ctr(c) => ctr_apply(c, iv, data),
            Cipher::Aes192Ctr(c) => ctr_apply(c, iv, data),
            Cipher::Aes256Ctr(c) => ctr_apply(c, iv, data),
            Cipher::Null => {}
        }
    }
}

fn cbc_encrypt<C: BlockCipherEncrypt>(cipher: &C, iv: &[u8], data: &mut [u8]) {
    let Ok(iv) = Array::try_from(iv) else { return };
    let (blocks, _tail) = Array::slice_as_chunks_mut(data);
    cbc::Encryptor::<&C>::inner_iv_init(cipher, &iv).encrypt_blocks(blocks);
}

fn cbc_decrypt<C: BlockCipherDecrypt + BlockCipherEncrypt>(cipher: &C, iv: &[u8], data: &mut [u8]) {
    let Ok(iv) = Array::try_from(iv) else { return };
    let (blocks, _tail) = Array::slice_as_chunks_mut(data);
    cbc::Decryptor::<&C>::inner_iv_init(cipher, &iv).decrypt_blocks(blocks);
}

fn ctr_apply<C: BlockCipherEncrypt<BlockSize = cbc::cipher::consts::U16>>(
    cipher: &C,
    iv: &[u8],
    data: &mut [u8],
) {
    let Ok(iv) = Array::try_from(iv) else { return };
    let core = ctr::CtrCore::<&C, ctr::flavors::Ctr128BE>::inner_iv_init(cipher, &iv);
    ctr::Ctr128BE::<&C>::from_core(core).apply_keystream(data);
}
