/** A lowdb adapter that writes with a unique temporary name, fsync and rename, so a crash never leaves a torn file. */
import {readFileSync} from 'node:fs'
import type {Adapter} from 'lowdb'
import {writeFileAtomic} from '../../util/fs.js'
import {recordText} from '../trail/records.js'

export class AtomicJsonFile<T> implements Adapter<T> {
  constructor(private readonly file: string) {}

  async read(): Promise<T | null> {
    let text: string
    try {
      // One synchronous read: a run record is small, and a read through the thread pool costs several times more CPU (see util/fs.ts).
      text = readFileSync(this.file, 'utf8')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
      throw error
    }
    return JSON.parse(text) as T
  }

  async write(data: T): Promise<void> {
    await writeFileAtomic(this.file, recordText(data))
  }
}
