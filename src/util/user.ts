import os from 'node:os'

/** The OS user running pipe, for decisions and timeline entries; never throws (a container may have no passwd entry). */
export function currentUser(): string {
  try {
    return os.userInfo().username
  } catch {
    return process.env.USER ?? 'unknown'
  }
}
