import { page } from '../ui.ts';

export async function usersPage(): Promise<void> {
  page('Users');
}

export async function userPage(_id: string): Promise<void> {
  page('User');
}
