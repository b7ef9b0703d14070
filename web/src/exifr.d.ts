// exifr ships types for its main entry only; the page imports its smallest build (privacy.ts).
declare module 'exifr/dist/mini.esm.mjs'
