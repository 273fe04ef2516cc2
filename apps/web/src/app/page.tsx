import { AddToCartButton } from '~/components/add-to-cart-button';
import { ProductArt } from '~/components/product-art';
import { formatMoney } from '~/lib/money';
import { db } from '~/server/db';
import { listProducts } from '~/server/services/catalog';

// Stock changes with every order: always read the catalog at request time.
export const dynamic = 'force-dynamic';

export default async function CatalogPage() {
  const products = await listProducts(db);
  return (
    <>
      <section className="mb-10">
        <h1 className="text-3xl font-semibold tracking-tight text-brand-900">Goods for careful people</h1>
        <p className="mt-2 max-w-2xl text-stone-600">
          Everything here is made to be used twice. So is our checkout: press Pay as often as you like, you
          are charged once.
        </p>
      </section>
      <ul className="grid gap-6 sm:grid-cols-2 lg:grid-cols-4" aria-label="Products">
        {products.map((product) => (
          <li
            key={product.sku}
            className="flex flex-col gap-3 rounded-2xl border border-stone-200 bg-white p-4 shadow-sm"
            data-testid={`product-${product.sku}`}
          >
            <ProductArt name={product.name} hue={product.imageHue} />
            <div className="flex-1">
              <h2 className="font-medium">{product.name}</h2>
              <p className="mt-1 text-sm text-stone-500">{product.description}</p>
            </div>
            <div className="flex items-center justify-between">
              <div>
                <p className="font-semibold">{formatMoney(product.priceCents, product.currency)}</p>
                <p className="text-xs text-stone-500">
                  {product.stock > 0 ? `${product.stock} in stock` : 'Out of stock'}
                </p>
              </div>
              <AddToCartButton sku={product.sku} name={product.name} disabled={product.stock === 0} />
            </div>
          </li>
        ))}
      </ul>
    </>
  );
}
