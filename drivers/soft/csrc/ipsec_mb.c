/*
 * The Intel IPsec-MB calls the soft driver makes (src/imb.rs). The library's
 * ChaCha20-Poly1305 "direct API" is a set of function pointers inside IMB_MGR,
 * reached through macros; calling them from Rust would mean mirroring that large,
 * version-specific struct. These two functions keep the layout on the C side,
 * compiled against the installed header.
 */
#include <stdint.h>
#include <string.h>
#include <intel-ipsec-mb.h>

#include "imb_mgr.h"

/* A manager set up for the best code path this CPU runs, or NULL. */
IMB_MGR *ocf_imb_new(void)
{
        return ocf_imb_mgr_new();
}

/*
 * One whole ChaCha20-Poly1305 message (RFC 8439), in place: encrypts or decrypts
 * `len` bytes of `data` and writes the 16-byte tag the message has (to write, or to
 * compare with the one received). `key` is 32 bytes, `iv` 12. The manager is only
 * read (function pointers), so threads may share it. The message state, which holds
 * keystream and the Poly1305 key, is wiped before returning.
 */
void ocf_imb_chacha20_poly1305(const IMB_MGR *m, int encrypt, const uint8_t *key,
                               const uint8_t *iv, const uint8_t *aad, uint64_t aad_len,
                               uint8_t *data, uint64_t len, uint8_t *tag)
{
        struct chacha20_poly1305_context_data ctx __attribute__((aligned(64)));

        IMB_CHACHA20_POLY1305_INIT(m, key, &ctx, iv, aad, aad_len);
        if (encrypt)
                IMB_CHACHA20_POLY1305_ENC_UPDATE(m, key, &ctx, data, data, len);
        else
                IMB_CHACHA20_POLY1305_DEC_UPDATE(m, key, &ctx, data, data, len);
        IMB_CHACHA20_POLY1305_ENC_FINALIZE(m, &ctx, tag, 16);
        /* glibc's explicit_bzero: a memset the compiler keeps; imb_clear_mem, byte by
         * byte, cost ~17 ns a message (3% at 1 KiB). */
        explicit_bzero(&ctx, sizeof(ctx));
}
