/* CRC-32 (the zlib / ISO-HDLC polynomial, as zlib.crc32), slice by 4, for
 * the optional C modules that check or write segment checksums
 * (ctindex/store/_invert.c, ctindex/search/_rank.c). zlib's own is reachable
 * from C only by linking zlib, which the optional build does not require.
 * Each including file has its own table, built by crc_init() before use. */
#ifndef CTINDEX_CRC32_H
#define CTINDEX_CRC32_H

#include <stddef.h>
#include <stdint.h>

static uint32_t crc_table[4][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = crc_table[0][i];
        for (int t = 1; t < 4; t++) {
            c = crc_table[0][c & 0xFF] ^ (c >> 8);
            crc_table[t][i] = c;
        }
    }
}

static uint32_t crc32_of(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 4) {
        c ^= (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
             ((uint32_t)p[3] << 24);
        c = crc_table[3][c & 0xFF] ^ crc_table[2][(c >> 8) & 0xFF] ^
            crc_table[1][(c >> 16) & 0xFF] ^ crc_table[0][c >> 24];
        p += 4;
        n -= 4;
    }
    while (n--) c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

#endif
