// A JPEG photo that says where it was taken is re-encoded through a canvas before it is hashed
// (media spec §15 item 3): the relay stores bytes unchanged, so the location would otherwise be
// published with the photo. The EXIF reader (exifr's smallest build) is a chunk of its own,
// fetched the first time a JPEG is attached. Re-encoding applies the EXIF orientation and keeps
// no metadata at all; when it cannot be done the file is refused rather than sent as it is.
type Exifr = { gps(input: Blob): Promise<{ latitude: number; longitude: number } | undefined> }

const JPEG_QUALITY = 0.92

function isJpeg(file: File): boolean {
  return file.type === 'image/jpeg' || (!file.type && /\.jpe?g$/i.test(file.name))
}

async function location(file: File): Promise<boolean> {
  let where: { latitude: number; longitude: number } | undefined
  try {
    const exifr = (await import('exifr/dist/mini.esm.mjs')) as unknown as Exifr
    where = await exifr.gps(file)
  } catch {
    return false // no readable EXIF: nothing to remove
  }
  return !!where && Number.isFinite(where.latitude) && Number.isFinite(where.longitude)
}

/** `file`, or a re-encoded copy without its metadata when it is a JPEG carrying GPS data. */
export async function withoutLocation(file: File): Promise<File> {
  if (!isJpeg(file) || !(await location(file))) return file
  let bitmap: ImageBitmap
  try {
    bitmap = await createImageBitmap(file, { imageOrientation: 'from-image' })
  } catch {
    throw new Error('this photo carries its location and could not be re-encoded without it')
  }
  try {
    const canvas = new OffscreenCanvas(bitmap.width, bitmap.height)
    const c = canvas.getContext('2d')
    if (!c) throw new Error('no canvas')
    c.drawImage(bitmap, 0, 0)
    const blob = await canvas.convertToBlob({ type: 'image/jpeg', quality: JPEG_QUALITY })
    return new File([blob], file.name, { type: 'image/jpeg', lastModified: file.lastModified })
  } catch {
    throw new Error('this photo carries its location and could not be re-encoded without it')
  } finally {
    bitmap.close()
  }
}
