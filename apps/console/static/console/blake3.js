/*
 * BLAKE3 (hash mode, 32-byte output) in plain JavaScript, for the console's in-browser
 * verifier. Written for this project from the BLAKE3 specification
 * (https://github.com/BLAKE3-team/BLAKE3-specs, public domain / CC0); no third-party code.
 * Part of the receipt mirror, under the project's license.
 *
 * window.MirrorBlake3.hash(Uint8Array) -> Uint8Array(32); .hex(Uint8Array) -> string.
 */
(function (root) {
  "use strict";

  const IV = new Uint32Array([
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
    0x5be0cd19,
  ]);
  const PERMUTATION = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8];
  const CHUNK_START = 1;
  const CHUNK_END = 2;
  const PARENT = 4;
  const ROOT = 8;
  const BLOCK_LEN = 64;
  const CHUNK_LEN = 1024;

  function rotr(x, n) {
    return (x >>> n) | (x << (32 - n));
  }

  function g(s, a, b, c, d, x, y) {
    s[a] = (s[a] + s[b] + x) | 0;
    s[d] = rotr(s[d] ^ s[a], 16);
    s[c] = (s[c] + s[d]) | 0;
    s[b] = rotr(s[b] ^ s[c], 12);
    s[a] = (s[a] + s[b] + y) | 0;
    s[d] = rotr(s[d] ^ s[a], 8);
    s[c] = (s[c] + s[d]) | 0;
    s[b] = rotr(s[b] ^ s[c], 7);
  }

  /** The 16-word compression output of one block. */
  function compress(cv, block, counter, blockLen, flags) {
    const s = new Uint32Array(16);
    s.set(cv, 0);
    s[8] = IV[0];
    s[9] = IV[1];
    s[10] = IV[2];
    s[11] = IV[3];
    s[12] = counter % 0x100000000;
    s[13] = Math.floor(counter / 0x100000000);
    s[14] = blockLen;
    s[15] = flags;
    let m = Uint32Array.from(block);
    for (let round = 0; round < 7; round++) {
      g(s, 0, 4, 8, 12, m[0], m[1]);
      g(s, 1, 5, 9, 13, m[2], m[3]);
      g(s, 2, 6, 10, 14, m[4], m[5]);
      g(s, 3, 7, 11, 15, m[6], m[7]);
      g(s, 0, 5, 10, 15, m[8], m[9]);
      g(s, 1, 6, 11, 12, m[10], m[11]);
      g(s, 2, 7, 8, 13, m[12], m[13]);
      g(s, 3, 4, 9, 14, m[14], m[15]);
      if (round < 6) {
        const next = new Uint32Array(16);
        for (let i = 0; i < 16; i++) next[i] = m[PERMUTATION[i]];
        m = next;
      }
    }
    for (let i = 0; i < 8; i++) {
      s[i] ^= s[i + 8];
      s[i + 8] ^= cv[i];
    }
    return s;
  }

  function blockWords(bytes, offset, length) {
    const words = new Uint32Array(16);
    for (let i = 0; i < length; i++) {
      words[i >> 2] |= bytes[offset + i] << (8 * (i & 3));
    }
    return words;
  }

  /** What is left to compress of a chunk or parent node: the last block, not yet flagged. */
  function chunkOutput(bytes, start, end, counter) {
    let cv = IV;
    const blocks = Math.max(1, Math.ceil((end - start) / BLOCK_LEN));
    for (let b = 0; b < blocks - 1; b++) {
      const flags = b === 0 ? CHUNK_START : 0;
      cv = compress(cv, blockWords(bytes, start + b * BLOCK_LEN, BLOCK_LEN), counter, BLOCK_LEN, flags)
        .subarray(0, 8);
    }
    const lastStart = start + (blocks - 1) * BLOCK_LEN;
    const lastLen = end - lastStart;
    return {
      cv: cv,
      block: blockWords(bytes, lastStart, lastLen),
      counter: counter,
      blockLen: lastLen,
      flags: (blocks === 1 ? CHUNK_START : 0) | CHUNK_END,
    };
  }

  function parentOutput(left, right) {
    const block = new Uint32Array(16);
    block.set(left, 0);
    block.set(right, 8);
    return { cv: IV, block: block, counter: 0, blockLen: BLOCK_LEN, flags: PARENT };
  }

  function chainingValue(output) {
    return compress(output.cv, output.block, output.counter, output.blockLen, output.flags)
      .subarray(0, 8);
  }

  function hash(bytes) {
    const chunks = Math.max(1, Math.ceil(bytes.length / CHUNK_LEN));
    const stack = [];
    for (let i = 0; i < chunks - 1; i++) {
      let cv = chainingValue(chunkOutput(bytes, i * CHUNK_LEN, (i + 1) * CHUNK_LEN, i));
      let total = i + 1;
      while ((total & 1) === 0) {
        cv = chainingValue(parentOutput(stack.pop(), cv));
        total >>= 1;
      }
      stack.push(cv);
    }
    let output = chunkOutput(bytes, (chunks - 1) * CHUNK_LEN, bytes.length, chunks - 1);
    while (stack.length) {
      output = parentOutput(stack.pop(), chainingValue(output));
    }
    const words = compress(output.cv, output.block, output.counter, output.blockLen, output.flags | ROOT);
    const digest = new Uint8Array(32);
    for (let i = 0; i < 8; i++) {
      digest[4 * i] = words[i] & 0xff;
      digest[4 * i + 1] = (words[i] >>> 8) & 0xff;
      digest[4 * i + 2] = (words[i] >>> 16) & 0xff;
      digest[4 * i + 3] = (words[i] >>> 24) & 0xff;
    }
    return digest;
  }

  function hex(bytes) {
    return Array.from(hash(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
  }

  root.MirrorBlake3 = { hash: hash, hex: hex };
})(typeof window !== "undefined" ? window : globalThis);
