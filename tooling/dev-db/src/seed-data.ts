/**
 * The demo shop: products, two API users and an admin. Tokens are fixed so the README's curl works as printed
 * (the database stores only their SHA-256). The admin token opens /admin (paste it at /admin/login).
 */
export const demoProducts = [
  {
    sku: 'MUG-STONE',
    name: 'Stoneware Mug',
    description: 'Hand-glazed, 350 ml, dishwasher safe.',
    priceCents: 1800,
    stock: 40,
    imageHue: 28,
  },
  {
    sku: 'NB-DOT-A5',
    name: 'Dotted Notebook',
    description: 'A5, 160 pages of 100 gsm paper.',
    priceCents: 1400,
    stock: 60,
    imageHue: 210,
  },
  {
    sku: 'PEN-BRASS',
    name: 'Brass Pen',
    description: 'Machined brass, takes standard refills.',
    priceCents: 4200,
    stock: 25,
    imageHue: 45,
  },
  {
    sku: 'TOTE-CANVAS',
    name: 'Canvas Tote',
    description: 'Heavy 14 oz canvas with an inside pocket.',
    priceCents: 2400,
    stock: 35,
    imageHue: 95,
  },
  {
    sku: 'LAMP-DESK',
    name: 'Desk Lamp',
    description: 'Warm LED, steel arm, three brightness steps.',
    priceCents: 8900,
    stock: 12,
    imageHue: 190,
  },
  {
    sku: 'PLANT-POT',
    name: 'Terracotta Pot',
    description: '15 cm pot with a drainage saucer.',
    priceCents: 1600,
    stock: 50,
    imageHue: 12,
  },
  {
    sku: 'BOTTLE-STEEL',
    name: 'Steel Bottle',
    description: 'Insulated, 750 ml, keeps cold 24 h.',
    priceCents: 3200,
    stock: 30,
    imageHue: 160,
  },
  {
    sku: 'TEA-SENCHA',
    name: 'Sencha Tea',
    description: '100 g of loose-leaf green tea from Shizuoka.',
    priceCents: 1200,
    stock: 3,
    imageHue: 120,
  },
] as const;

export const demoUsers = [
  {
    email: 'alice@example.com',
    name: 'Alice Demo',
    token: 'idem_demo_alice_7Hk2Qm9Xw4Rt8Lp3Vz6Nc1Bd',
    role: 'customer',
  },
  {
    email: 'bob@example.com',
    name: 'Bob Demo',
    token: 'idem_demo_bob_3Fs8Jd2Kq7Wm5Xr9Tn4Hy6Pa',
    role: 'customer',
  },
  {
    email: 'admin@example.com',
    name: 'Ada Admin',
    token: 'idem_demo_admin_5Wq8Tz3Kd7Lm2Xv9Rc4Hn6Pj',
    role: 'admin',
  },
] as const;

export const demoAdmin = demoUsers[2];
